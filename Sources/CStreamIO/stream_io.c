/* A connection's socket-side bytes and the OpenSSL BIO over them; see CStreamIO.h.
 *
 * TLS records are written by SSL_write into the output queue rather than to the socket, so the
 * records of one loop iteration leave in one send(2), and ciphertext is read from the socket
 * by the loop (one read(2) per readable event) and handed to OpenSSL from memory: no read(2)
 * that returns EAGAIN to end each batch, no FIONREAD. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "CStreamIO.h"

/* The first queue allocation; the queue then doubles as needed and keeps its memory. */
#define RELAYD_STREAM_IO_MIN_CAPACITY 4096
/* An emptied queue larger than this gives its memory back (a burst for a slow reader). */
#define RELAYD_STREAM_IO_KEEP_CAPACITY (256 * 1024)

void relayd_stream_io_init(relayd_stream_io *io, size_t output_limit) {
    memset(io, 0, sizeof(*io));
    pthread_mutex_init(&io->lock, NULL);
    io->output_limit = output_limit;
}

void relayd_stream_io_destroy(relayd_stream_io *io) {
    relayd_stream_io_release(io);
    pthread_mutex_destroy(&io->lock);
}

void relayd_stream_io_lock(relayd_stream_io *io) { pthread_mutex_lock(&io->lock); }
void relayd_stream_io_unlock(relayd_stream_io *io) { pthread_mutex_unlock(&io->lock); }

size_t relayd_stream_io_pending(const relayd_stream_io *io) { return io->output_end - io->output_start; }

int relayd_stream_io_append(relayd_stream_io *io, const void *bytes, size_t count) {
    unsigned char *into = relayd_stream_io_reserve(io, count);
    if (into == NULL) return -1;
    memcpy(into, bytes, count);
    relayd_stream_io_commit(io, count);
    return 0;
}

unsigned char *relayd_stream_io_reserve(relayd_stream_io *io, size_t count) {
    size_t pending = relayd_stream_io_pending(io);
    if (count > io->output_limit || pending > io->output_limit - count) return NULL;
    if (io->output_capacity - io->output_end < count) {
        if (io->output_start > 0) {
            memmove(io->output, io->output + io->output_start, pending);
            io->output_start = 0;
            io->output_end = pending;
        }
        if (io->output_capacity - pending < count) {
            size_t capacity = io->output_capacity ? io->output_capacity : RELAYD_STREAM_IO_MIN_CAPACITY;
            while (capacity - pending < count) capacity *= 2;
            unsigned char *grown = realloc(io->output, capacity);
            if (grown == NULL) return NULL;
            io->output = grown;
            io->output_capacity = capacity;
        }
    }
    return io->output + io->output_end;
}

void relayd_stream_io_commit(relayd_stream_io *io, size_t count) {
    io->output_end += count;
    io->appended += count;
}

static void relayd_stream_io_consume(relayd_stream_io *io, size_t count) {
    io->output_start += count;
    if (io->output_start < io->output_end) return;
    io->output_start = 0;
    io->output_end = 0;
    if (io->output_capacity > RELAYD_STREAM_IO_KEEP_CAPACITY) relayd_stream_io_release(io);
}

ssize_t relayd_stream_io_flush(relayd_stream_io *io, int fd) {
    size_t pending = relayd_stream_io_pending(io);
    if (pending == 0) return 0;
    ssize_t written;
    do {
        // send(MSG_NOSIGNAL), not write(2): a peer that reset the connection gives EPIPE
        // here instead of a SIGPIPE that would end the process wherever the disposition is
        // not "ignore" (relayd ignores it, a program embedding the loops may not).
        written = send(fd, io->output + io->output_start, pending, MSG_NOSIGNAL);
    } while (written < 0 && errno == EINTR);
    if (written > 0) relayd_stream_io_consume(io, (size_t)written);
    return written;
}

void relayd_stream_io_release(relayd_stream_io *io) {
    free(io->output);
    io->output = NULL;
    io->output_start = 0;
    io->output_end = 0;
    io->output_capacity = 0;
}

/* ---- BIO ---- */

static int relayd_bio_write(BIO *bio, const char *bytes, int count) {
    BIO_clear_retry_flags(bio);
    if (count <= 0) return 0;
    relayd_stream_io *io = BIO_get_data(bio);
    return relayd_stream_io_append(io, bytes, (size_t)count) == 0 ? count : -1;
}

static int relayd_bio_read(BIO *bio, char *into, int capacity) {
    BIO_clear_retry_flags(bio);
    if (capacity <= 0) return 0;
    relayd_stream_io *io = BIO_get_data(bio);
    if (io->input_length == 0) {
        BIO_set_retry_read(bio);
        return -1;
    }
    size_t count = io->input_length < (size_t)capacity ? io->input_length : (size_t)capacity;
    memcpy(into, io->input, count);
    io->input += count;
    io->input_length -= count;
    return (int)count;
}

static long relayd_bio_ctrl(BIO *bio, int command, long number, void *pointer) {
    (void)number;
    (void)pointer;
    relayd_stream_io *io = BIO_get_data(bio);
    switch (command) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_PENDING:
        return io ? (long)io->input_length : 0;
    case BIO_CTRL_WPENDING:
        return io ? (long)relayd_stream_io_pending(io) : 0;
    default:
        return 0;
    }
}

static int relayd_bio_create(BIO *bio) {
    BIO_set_init(bio, 1);
    return 1;
}

static BIO_METHOD *relayd_bio_method;
static pthread_once_t relayd_bio_method_once = PTHREAD_ONCE_INIT;

static void relayd_bio_method_init(void) {
    BIO_METHOD *method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "relayd stream");
    if (method == NULL) return;
    BIO_meth_set_write(method, relayd_bio_write);
    BIO_meth_set_read(method, relayd_bio_read);
    BIO_meth_set_ctrl(method, relayd_bio_ctrl);
    BIO_meth_set_create(method, relayd_bio_create);
    relayd_bio_method = method;
}

BIO *relayd_stream_io_bio(relayd_stream_io *io) {
    pthread_once(&relayd_bio_method_once, relayd_bio_method_init);
    if (relayd_bio_method == NULL) return NULL;
    BIO *bio = BIO_new(relayd_bio_method);
    if (bio != NULL) BIO_set_data(bio, io);
    return bio;
}

/* ---- the allocator ---- */

#include <malloc.h>

int relayd_trim_heap(void) { return malloc_trim(0); }
