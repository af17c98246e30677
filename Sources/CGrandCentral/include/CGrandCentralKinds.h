// The numbers the C shims (Sources/GrandCentralBlocks) and the Swift engine both use, in
// one list each. C includes this header (GrandCentralBlocks/shim.h); Swift imports it with
// the CGrandCentral module, where each enum is a Swift enum (cases named by swift_name)
// that the engine names by typealias (`SourceType`, `SourceHandlerKind`, `DataFormat`),
// so no second, hand-kept list exists.
// Nothing here is a libdispatch name, and nothing else is here: the shims include
// libdispatch's public header, and this one must sit beside it without a clash.
#ifndef CGRANDCENTRAL_KINDS_H
#define CGRANDCENTRAL_KINDS_H

#define GC_CLOSED_ENUM __attribute__((enum_extensibility(closed)))

/// The kind of a source, and the `kind` word of each `_dispatch_source_type_*` object
/// (GrandCentralBlocks/data_symbols.c), which starts with GC_SOURCE_TYPE_MAGIC so that
/// dispatch_source_create tells its own types from any other pointer.
typedef enum GC_CLOSED_ENUM {
    GC_SOURCE_DATA_ADD __attribute__((swift_name("dataAdd"))) = 0,
    GC_SOURCE_DATA_OR __attribute__((swift_name("dataOr"))) = 1,
    GC_SOURCE_DATA_REPLACE __attribute__((swift_name("dataReplace"))) = 2,
    GC_SOURCE_READ __attribute__((swift_name("read"))) = 3,
    GC_SOURCE_WRITE __attribute__((swift_name("write"))) = 4,
    GC_SOURCE_SIGNAL __attribute__((swift_name("signal"))) = 5,
    GC_SOURCE_TIMER __attribute__((swift_name("timer"))) = 6,
    GC_SOURCE_PROCESS __attribute__((swift_name("process"))) = 7,
    GC_SOURCE_VNODE __attribute__((swift_name("vnode"))) = 8,
    /// libdispatch's private DISPATCH_SOURCE_TYPE_INTERVAL (IntervalSource.swift).
    GC_SOURCE_INTERVAL __attribute__((swift_name("interval"))) = 9,
} gc_source_kind_t;
#define GC_SOURCE_TYPE_MAGIC 0x47435354u /* "GCST" */

/// Which handler of a source a setter sets (gc_source_set_block_handler).
typedef enum GC_CLOSED_ENUM {
    GC_SOURCE_HANDLER_EVENT __attribute__((swift_name("event"))) = 0,
    GC_SOURCE_HANDLER_CANCEL __attribute__((swift_name("cancel"))) = 1,
    GC_SOURCE_HANDLER_REGISTRATION __attribute__((swift_name("registration"))) = 2,
} gc_source_handler_kind_t;

/// A data format, and the `kind` word of each `_dispatch_data_format_type_*` object
/// (GrandCentralBlocks/data_symbols.c), which starts with GC_DATA_FORMAT_MAGIC.
typedef enum GC_CLOSED_ENUM {
    GC_DATA_FORMAT_NONE __attribute__((swift_name("none"))) = 0,
    GC_DATA_FORMAT_UTF8 __attribute__((swift_name("utf8"))) = 1,
    GC_DATA_FORMAT_UTF16LE __attribute__((swift_name("utf16le"))) = 2,
    GC_DATA_FORMAT_UTF16BE __attribute__((swift_name("utf16be"))) = 3,
    GC_DATA_FORMAT_UTF_ANY __attribute__((swift_name("utfAny"))) = 4,
    GC_DATA_FORMAT_BASE32 __attribute__((swift_name("base32"))) = 5,
    GC_DATA_FORMAT_BASE32HEX __attribute__((swift_name("base32hex"))) = 6,
    GC_DATA_FORMAT_BASE64 __attribute__((swift_name("base64"))) = 7,
} gc_data_format_t;
#define GC_DATA_FORMAT_MAGIC 0x47434446u /* "GCDF" */

/// Bits of the flags word of the internal `_f` entry points the block shims call
/// (gc_*_flags_f, gc_work_item_core_notify).
#define GC_SUBMIT_BARRIER 1u /* run as a barrier on the queue */

#endif
