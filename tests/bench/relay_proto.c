/* relay_proto.c - a bare TCP relay with two I/O engines, epoll and io_uring, to
 * measure what io_uring would save lb's relay before building it into lb
 * (issue 31, part 2). halfcore.py compiles it with `cc -O2 ... -luring` into its
 * temporary directory; nothing built goes into the tree.
 *
 *   relay_proto epoll|uring PORT THREADS BACKEND_PORT...
 *
 * Each of THREADS threads has its own SO_REUSEPORT listener on 127.0.0.1:PORT
 * and its own loop; connections go round robin over the backends. The relay
 * is lb's, reduced to its core: one 16 KiB buffer per direction, a half is
 * read again only once its buffer is written (backpressure), EOF is passed
 * on with shutdown(SHUT_WR), and a connection ends when both halves have.
 * There are no counters, timeouts, checks or logs, so both engines carry the
 * same (least) work, and the difference between them is the engine's:
 *
 *   epoll  lb's way: sockets edge-triggered in one epoll set, added once,
 *          read until a short read, written at once.
 *   uring  accept multishot; connect, recv, send and shutdown are queued
 *          and go in with the next io_uring_enter, which also waits: one
 *          system call a loop turn (SINGLE_ISSUER | DEFER_TASKRUN, the
 *          ring's fd registered). The server's socket is made with
 *          socket(2), as in the epoll engine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 16384

struct half {
    int from, to;
    size_t len, off;            /* bytes in buf, bytes of them sent */
    bool eof, shut;             /* from's EOF read; to shut down */
    bool fin;                   /* epoll: from's FIN or reset reported */
    bool recv_busy, send_busy;  /* uring: an operation in flight */
    char buf[BUF];
};

struct conn {
    struct half up, down;       /* client -> server, server -> client */
    struct sockaddr_in to;      /* the server's (uring: read when the connect goes in) */
    int inflight;               /* uring: operations not yet completed */
    bool connected, dead;
};

static int nbackends;
static int backends[64];
static bool use_uring;
static int listen_port;

static int
listener(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(listen_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));   /* inherited */
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == -1 || listen(fd, 4096) == -1) {
        perror("bind/listen");
        exit(1);
    }
    return fd;
}

static struct conn *
conn_new(int cfd, unsigned *rr)
{
    struct conn *c = calloc(1, sizeof(*c));
    int sfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;

    setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->to = (struct sockaddr_in){ .sin_family = AF_INET,
                                  .sin_port = htons(backends[(*rr)++ % nbackends]),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    c->up.from = c->down.to = cfd;
    c->up.to = c->down.from = sfd;
    return c;
}

/* ------------------------------------------------------------------ epoll */

/* Moves what it can of one direction; false once the connection must end. */
static bool
pump(struct half *h)
{
    bool is_empty = false;      /* the last read was short: the socket has no more */

    for (;;) {
        while (h->off < h->len) {
            ssize_t n = send(h->to, h->buf + h->off, h->len - h->off, MSG_NOSIGNAL);
            if (n < 0)
                return errno == EAGAIN;
            h->off += (size_t)n;
        }
        h->off = h->len = 0;
        if (h->eof) {
            if (!h->shut)
                shutdown(h->to, SHUT_WR);
            h->shut = true;
            return true;
        }
        if (is_empty)
            return true;
        ssize_t n = recv(h->from, h->buf, BUF, 0);
        if (n == 0) {
            h->eof = true;
            continue;
        }
        if (n < 0)
            return errno == EAGAIN;
        h->len = (size_t)n;
        is_empty = n < BUF && !h->fin;  /* unless a FIN came: then read on to the EOF */
    }
}

static void
epoll_loop(void)
{
    int ep = epoll_create1(0), lfd = listener();
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL }, evs[64];
    unsigned rr = 0;

    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    for (;;) {
        int n = epoll_wait(ep, evs, 64, -1);
        for (int i = 0; i < n; i++) {
            struct conn *c = (struct conn *)((uintptr_t)evs[i].data.ptr & ~(uintptr_t)1);
            if (c == NULL) {
                int cfd;
                while ((cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    c = conn_new(cfd, &rr);
                    connect(c->up.to, (struct sockaddr *)&c->to, sizeof(c->to));
                    struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                             .data.ptr = c };
                    epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &e);
                    e.data.ptr = (void *)((uintptr_t)c | 1);     /* the server's */
                    epoll_ctl(ep, EPOLL_CTL_ADD, c->up.to, &e);
                }
                continue;
            }
            if (c->dead)
                continue;
            if (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                ((uintptr_t)evs[i].data.ptr & 1 ? &c->down : &c->up)->fin = true;
            if (!pump(&c->up) || !pump(&c->down) || (c->up.shut && c->down.shut)) {
                close(c->up.from);
                close(c->up.to);
                c->dead = true;         /* freed after the batch: it may appear again */
            }
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = (struct conn *)((uintptr_t)evs[i].data.ptr & ~(uintptr_t)1);
            if (c != NULL && c->dead) {
                for (int j = i + 1; j < n; j++)     /* free once */
                    if (((uintptr_t)evs[j].data.ptr & ~(uintptr_t)1) == (uintptr_t)c)
                        evs[j].data.ptr = NULL;
                free(c);
            }
        }
    }
}

/* ------------------------------------------------------------------ uring */

enum op { OP_ACCEPT, OP_CONNECT, OP_RECV_UP, OP_RECV_DOWN, OP_SEND_UP, OP_SEND_DOWN, OP_SHUT };

static __thread struct io_uring ring;       /* each thread its own ring */
static __thread int uring_lfd;

static struct io_uring_sqe *
sqe_get(void)
{
    struct io_uring_sqe *sqe;

    while ((sqe = io_uring_get_sqe(&ring)) == NULL)
        io_uring_submit(&ring);
    return sqe;
}

static void
queue(struct conn *c, enum op op, struct io_uring_sqe *sqe)
{
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | op);
    if (c != NULL)
        c->inflight++;
}

static void uring_step(struct conn *c, struct half *h, bool up);

static void
uring_kill(struct conn *c)
{
    if (!c->dead) {
        c->dead = true;
        shutdown(c->up.from, SHUT_RDWR);        /* ends the recvs in flight */
        shutdown(c->up.to, SHUT_RDWR);
    }
    if (c->inflight == 0) {
        close(c->up.from);
        close(c->up.to);
        free(c);
    }
}

/* Queues what one direction can do next. */
static void
uring_step(struct conn *c, struct half *h, bool up)
{
    if (c->dead || !c->connected)
        return;
    if (h->off < h->len) {
        if (!h->send_busy) {
            struct io_uring_sqe *sqe = sqe_get();
            io_uring_prep_send(sqe, h->to, h->buf + h->off, h->len - h->off, MSG_NOSIGNAL);
            queue(c, up ? OP_SEND_UP : OP_SEND_DOWN, sqe);
            h->send_busy = true;
        }
        return;
    }
    if (h->eof) {
        if (!h->shut) {
            h->shut = true;
            struct io_uring_sqe *sqe = sqe_get();
            io_uring_prep_shutdown(sqe, h->to, SHUT_WR);
            queue(c, OP_SHUT, sqe);
        }
        return;
    }
    if (!h->recv_busy) {
        struct io_uring_sqe *sqe = sqe_get();
        io_uring_prep_recv(sqe, h->from, h->buf, BUF, 0);
        queue(c, up ? OP_RECV_UP : OP_RECV_DOWN, sqe);
        h->recv_busy = true;
    }
}

static void
uring_accept(int cfd, unsigned *rr)
{
    struct conn *c = conn_new(cfd, rr);
    struct io_uring_sqe *sqe = sqe_get();

    io_uring_prep_connect(sqe, c->up.to, (struct sockaddr *)&c->to, sizeof(c->to));
    queue(c, OP_CONNECT, sqe);
}

static void
uring_complete(uint64_t data, int res, unsigned flags, unsigned *rr)
{
    struct conn *c = (struct conn *)(uintptr_t)(data & ~7ull);
    enum op op = data & 7;

    if (op == OP_ACCEPT) {
        if (res >= 0)
            uring_accept(res, rr);
        if (!(flags & IORING_CQE_F_MORE)) {
            struct io_uring_sqe *sqe = sqe_get();
            io_uring_prep_multishot_accept(sqe, uring_lfd, NULL, NULL, SOCK_NONBLOCK);
            queue(NULL, OP_ACCEPT, sqe);
        }
        return;
    }
    c->inflight--;
    if (c->dead) {
        uring_kill(c);
        return;
    }
    if (res < 0 && op != OP_SHUT) {    /* refused, reset: the connection ends */
        uring_kill(c);
        return;
    }
    switch (op) {
    case OP_CONNECT:
        c->connected = true;
        break;
    case OP_RECV_UP:
    case OP_RECV_DOWN: {
        struct half *h = op == OP_RECV_UP ? &c->up : &c->down;
        h->recv_busy = false;
        if (res == 0)
            h->eof = true;
        h->len = (size_t)res;
        h->off = 0;
        break;
    }
    case OP_SEND_UP:
    case OP_SEND_DOWN: {
        struct half *h = op == OP_SEND_UP ? &c->up : &c->down;
        h->send_busy = false;
        h->off += (size_t)res;
        if (h->off == h->len)
            h->off = h->len = 0;
        break;
    }
    default:
        break;
    }
    if (c->up.shut && c->down.shut) {
        uring_kill(c);
        return;
    }
    uring_step(c, &c->up, true);
    uring_step(c, &c->down, false);
}

static void
uring_loop(void)
{
    struct io_uring_params p = { .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN };
    unsigned rr = 0;

    if (io_uring_queue_init_params(4096, &ring, &p) < 0) {
        p.flags = 0;
        if (io_uring_queue_init_params(4096, &ring, &p) < 0) {
            perror("io_uring_queue_init");
            exit(1);
        }
        fprintf(stderr, "relay_proto: no DEFER_TASKRUN here, plain ring\n");
    }
    io_uring_register_ring_fd(&ring);   /* io_uring_enter without an fd lookup */
    uring_lfd = listener();
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_multishot_accept(sqe, uring_lfd, NULL, NULL, SOCK_NONBLOCK);
    queue(NULL, OP_ACCEPT, sqe);
    for (;;) {
        struct io_uring_cqe *cqe;
        unsigned head, n = 0;

        if (io_uring_submit_and_wait(&ring, 1) < 0 && errno != EINTR)
            continue;
        io_uring_for_each_cqe(&ring, head, cqe) {
            uring_complete(cqe->user_data, cqe->res, cqe->flags, &rr);
            n++;
        }
        io_uring_cq_advance(&ring, n);
    }
}

static void *
thread_main(void *arg)
{
    (void)arg;
    if (use_uring)
        uring_loop();
    else
        epoll_loop();
    return NULL;
}

int
main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: relay_proto epoll|uring PORT THREADS BACKEND_PORT...\n");
        return 2;
    }
    use_uring = strcmp(argv[1], "uring") == 0;
    listen_port = atoi(argv[2]);
    int threads = atoi(argv[3]);
    for (int i = 4; i < argc && nbackends < 64; i++)
        backends[nbackends++] = atoi(argv[i]);
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, thread_main, NULL);
    pthread_join(t[0], NULL);
    return 0;
}
