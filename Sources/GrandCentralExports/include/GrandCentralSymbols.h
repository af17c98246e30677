// The data symbols of the C ABI, as the handle layer (GrandCentralExports/Handles.swift,
// Data.swift) sees them. libdispatch's header takes the address of these
// (dispatch_get_main_queue() is `&_dispatch_main_q`, DISPATCH_QUEUE_CONCURRENT is
// `&_dispatch_queue_attr_concurrent`, dispatch_data_empty is `&_dispatch_data_empty`);
// DISPATCH_DATA_DESTRUCTOR_FREE/_MUNMAP are the *values* of the destructor symbols
// (pointers that are compared, never called). They are defined in GrandCentralBlocks
// (data_symbols.c), which every build of the C ABI links. Only their addresses (and the
// destructors' values) are used here; the engine never sees them.
//
// Declared with types of our own: the public header's `struct dispatch_queue_s` and block
// types are not for Swift's importer.
#ifndef GRANDCENTRAL_SYMBOLS_H
#define GRANDCENTRAL_SYMBOLS_H

extern char _dispatch_main_q[];
extern char _dispatch_queue_attr_concurrent[];
extern char _dispatch_data_empty[];
extern void *const _dispatch_data_destructor_free;
extern void *const _dispatch_data_destructor_munmap;
extern void *const _dispatch_data_destructor_none;

static inline void *gc_main_queue_symbol(void) { return (void *)_dispatch_main_q; }
static inline void *gc_attr_concurrent_symbol(void) { return (void *)_dispatch_queue_attr_concurrent; }
static inline void *gc_data_empty_symbol(void) { return (void *)_dispatch_data_empty; }
static inline const void *gc_data_destructor_free_value(void) { return _dispatch_data_destructor_free; }
static inline const void *gc_data_destructor_munmap_value(void) { return _dispatch_data_destructor_munmap; }
static inline const void *gc_data_destructor_none_value(void) { return _dispatch_data_destructor_none; }

#endif
