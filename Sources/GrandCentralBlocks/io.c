// Block entry points of io.h (see shim.h): each copies its blocks and calls the _f form
// with a trampoline. A handler block that is called several times (an I/O handler) is
// released by the trampoline of its final (done) call; a cleanup handler block after its
// one call; a convenience handler after its one call.
#include "shim.h"

static void gc_io_handler_trampoline(void *context, bool done, dispatch_data_t data, int error)
{
	dispatch_io_handler_t block = (dispatch_io_handler_t)context;
	block(done, data, error);
	if (done) Block_release(block);
}

static void gc_io_cleanup_trampoline(void *context, int error)
{
	void (^block)(int) = (void (^)(int))context;
	block(error);
	Block_release(block);
}

static void gc_io_convenience_trampoline(void *context, dispatch_data_t data, int error)
{
	void (^block)(dispatch_data_t, int) = (void (^)(dispatch_data_t, int))context;
	block(data, error);
	Block_release(block);
}

void dispatch_read(dispatch_fd_t fd, size_t length, dispatch_queue_t queue,
		void (^handler)(dispatch_data_t data, int error))
{
	if (handler == NULL) gc_client_bug("dispatch_read", "handler is NULL");
	dispatch_read_f(fd, length, queue, gc_block_copy((dispatch_block_t)handler, "dispatch_read"), gc_io_convenience_trampoline);
}

void dispatch_write(dispatch_fd_t fd, dispatch_data_t data, dispatch_queue_t queue,
		void (^handler)(dispatch_data_t data, int error))
{
	if (handler == NULL) gc_client_bug("dispatch_write", "handler is NULL");
	dispatch_write_f(fd, data, queue, gc_block_copy((dispatch_block_t)handler, "dispatch_write"), gc_io_convenience_trampoline);
}

dispatch_io_t dispatch_io_create(dispatch_io_type_t type, dispatch_fd_t fd, dispatch_queue_t queue,
		void (^cleanup_handler)(int error))
{
	if (cleanup_handler == NULL) return dispatch_io_create_f(type, fd, queue, NULL, NULL);
	void *copy = gc_block_copy((dispatch_block_t)cleanup_handler, "dispatch_io_create");
	dispatch_io_t channel = dispatch_io_create_f(type, fd, queue, copy, gc_io_cleanup_trampoline);
	if (channel == NULL) Block_release(copy);
	return channel;
}

dispatch_io_t dispatch_io_create_with_path(dispatch_io_type_t type, const char *path, int oflag,
		mode_t mode, dispatch_queue_t queue, void (^cleanup_handler)(int error))
{
	if (cleanup_handler == NULL) {
		return dispatch_io_create_with_path_f(type, path, oflag, mode, queue, NULL, NULL);
	}
	void *copy = gc_block_copy((dispatch_block_t)cleanup_handler, "dispatch_io_create_with_path");
	dispatch_io_t channel = dispatch_io_create_with_path_f(type, path, oflag, mode, queue, copy,
			gc_io_cleanup_trampoline);
	if (channel == NULL) Block_release(copy);
	return channel;
}

dispatch_io_t dispatch_io_create_with_io(dispatch_io_type_t type, dispatch_io_t io,
		dispatch_queue_t queue, void (^cleanup_handler)(int error))
{
	if (cleanup_handler == NULL) return dispatch_io_create_with_io_f(type, io, queue, NULL, NULL);
	void *copy = gc_block_copy((dispatch_block_t)cleanup_handler, "dispatch_io_create_with_io");
	dispatch_io_t channel = dispatch_io_create_with_io_f(type, io, queue, copy, gc_io_cleanup_trampoline);
	if (channel == NULL) Block_release(copy);
	return channel;
}

void dispatch_io_read(dispatch_io_t channel, off_t offset, size_t length, dispatch_queue_t queue,
		dispatch_io_handler_t io_handler)
{
	if (io_handler == NULL) gc_client_bug("dispatch_io_read", "handler is NULL");
	dispatch_io_read_f(channel, offset, length, queue, gc_block_copy((dispatch_block_t)io_handler, "dispatch_io_read"),
			gc_io_handler_trampoline);
}

void dispatch_io_write(dispatch_io_t channel, off_t offset, dispatch_data_t data,
		dispatch_queue_t queue, dispatch_io_handler_t io_handler)
{
	if (io_handler == NULL) gc_client_bug("dispatch_io_write", "handler is NULL");
	dispatch_io_write_f(channel, offset, data, queue, gc_block_copy((dispatch_block_t)io_handler, "dispatch_io_write"),
			gc_io_handler_trampoline);
}

void dispatch_io_barrier(dispatch_io_t channel, dispatch_block_t barrier)
{
	if (barrier == NULL) gc_client_bug("dispatch_io_barrier", "barrier is NULL");
	dispatch_io_barrier_f(channel, gc_block_copy(barrier, "dispatch_io_barrier"), gc_block_invoke_and_release);
}
