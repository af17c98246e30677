// Block entry point of once.h. The header turns dispatch_once into an inline check that
// calls this function only while the predicate is not yet ~0l; here the block becomes
// the context of dispatch_once_f, which runs it before returning (no copy needed).
#include "shim.h"

// The header's macros would rename the definition below to the inline fast path.
#undef dispatch_once
#undef dispatch_once_f

void dispatch_once(dispatch_once_t *predicate, dispatch_block_t block)
{
	if (block == NULL) gc_client_bug("dispatch_once", "block is NULL");
	dispatch_once_f(predicate, (void *)block, gc_block_invoke);
}
