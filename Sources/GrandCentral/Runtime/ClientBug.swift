import CGrandCentral

/// The C signature of a work item: `dispatch_function_t`.
typealias DispatchFunction = @convention(c) (UnsafeMutableRawPointer?) -> Void

/// Reports API misuse the way every GrandCentral entry point does: one line on stderr,
/// `GrandCentral: BUG IN CLIENT: <function>: <what>`, then a trap (SIGILL on x86-64, as
/// libdispatch's client crashes; DESIGN.md, hard rule 6).
@inline(never)
func clientBug(_ function: StaticString, _ what: StaticString) -> Never {
    function.withUTF8Buffer { f in
        what.withUTF8Buffer { w in
            f.withMemoryRebound(to: CChar.self) { fc in
                w.withMemoryRebound(to: CChar.self) { wc in
                    gc_client_bug(fc.baseAddress!, wc.baseAddress!)
                }
            }
        }
    }
}

/// Same, for a message assembled at run time.
@inline(never)
func clientBug(_ function: StaticString, message: String) -> Never {
    function.withUTF8Buffer { f in
        f.withMemoryRebound(to: CChar.self) { fc in
            message.withCString { gc_client_bug(fc.baseAddress!, $0) }
        }
    }
}
