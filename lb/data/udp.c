/*
 * udp.c - UDP frontends: flows of datagrams between clients and servers
 * (data.h, "udp.c"; README, "UDP").
 *
 * A flow is one client address and port of one listening address. Its
 * first datagram picks a server with the pool's algorithm and opens one
 * socket connected to that server: the kernel then hands the flow every
 * reply of that server to that socket, and drops (with an ICMP error) what
 * comes from anyone else, so a reply needs no lookup. Replies leave from
 * the worker's listening socket, hence from the frontend's address.
 *
 * A flow ends after udp_idle_timeout without a datagram either way, after
 * udp_responses replies to each datagram of its client, when its server's
 * drain deadline passes, or when the table is at udp_max_flows and a new
 * client needs room (the least recently used flow goes, as in nginx and
 * IPVS). A flow whose server its
 * checks took out moves to a newly picked server at its client's next
 * datagram, as Envoy's UDP proxy does: a DNS client that retries from the
 * same port must not keep waiting for a dead server.
 *
 * One receive buffer per worker (the relay buffer: 64 KiB, larger than any
 * datagram), never one per flow; a datagram is never cut. A flow's socket
 * is a member of the worker's epoll set (io_fd) as a session's are: one
 * epoll_ctl when it opens, none when it closes.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "daemon.h"
#include "data.h"
#include "lb_enum.h"
#include "state.h"

/* Datagrams read per readiness event, each way: a flood from one side
 * does not starve the other flows of the worker. */
#define LB_UDP_BATCH 64
/* Hash buckets at first, and the most flows per bucket before doubling. */
#define LB_UDP_BUCKETS_MIN 64

static const char *const lb_udp_drop_names[] = {
    [LB_UDP_DROP_NO_SERVER] = "no_server", [LB_UDP_DROP_DENIED] = "denied",
    [LB_UDP_DROP_NO_SOCKET] = "no_socket", [LB_UDP_DROP_SEND_FAILED] = "send_failed",
    [LB_UDP_DROP_TOO_MANY_FLOWS] = "too_many_flows",
};
LB_ENUM_NAME(lb_udp_drop_name, enum lb_udp_drop, lb_udp_drop_names, "unknown")

static struct lb_log_limit lb_udp_full_limit = LB_LOG_LIMIT(1);
static struct lb_log_limit lb_udp_error_limit = LB_LOG_LIMIT(LB_LOG_CLIENT_EVENTS_PER_S);

union lb_udp_addr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

struct lb_flow {
    struct lb_flow *hnext;              /* hash chain */
    struct lb_flow *newer, *older;      /* the table's LRU list */
    struct lb_udp_table *t;
    struct lb_gen *gen;                 /* one reference: server lives in it */
    struct lb_frontend *fe;
    struct lb_server *server;
    struct lb_flow *again_next;         /* the table's flows with replies
                                           left to read (LB_UDP_BATCH) */
    bool is_again;
    int fd;                             /* connected to the server; in the
                                           worker's io_fd, left by close */
    uint32_t hash;
    socklen_t client_len;
    union lb_udp_addr client;
    uint64_t start_ms, last_ms;
    uint64_t replies;
    uint64_t datagrams_in, datagrams_out;   /* from, to the client */
    uint64_t bytes_in, bytes_out;
};

struct lb_udp_table {
    struct lb_worker *w;
    int fd;                             /* the worker's listening socket */
    struct lb_gen *gen;                 /* the worker's: no reference */
    struct lb_frontend *fe;             /* new flows' frontend, of gen */
    struct lb_flow **buckets;
    size_t mask;                        /* buckets - 1 */
    size_t nflows;
    struct lb_flow *newest, *oldest;
    struct event *idle_ev;              /* the oldest flow's idle end */
    struct event *again_ev;             /* lb_udp_on_again, next turn */
    struct lb_flow *again;              /* flows to read on next turn ... */
    struct lb_flow *again_now;          /* ... and in this one (on_again) */
    char *buf;                          /* the worker's (w->udp_buf) */
};

static void lb_udp_on_idle(evutil_socket_t fd, short what, void *arg);
static void lb_udp_on_again(evutil_socket_t fd, short what, void *arg);
static void lb_udp_idle_arm(struct lb_udp_table *t, uint64_t now);

/* -------------------------------------------------------------- the table */

static uint32_t
lb_udp_hash(const union lb_udp_addr *a)
{
    if (a->sa.sa_family == AF_INET6)
        return (uint32_t)bal_hash_bytes(&a->in6.sin6_addr, sizeof(a->in6.sin6_addr)) ^
               a->in6.sin6_port * 0x9e3779b1u;
    return (uint32_t)bal_hash_bytes(&a->in.sin_addr, sizeof(a->in.sin_addr)) ^
           a->in.sin_port * 0x9e3779b1u;
}

static bool
lb_udp_addr_equal(const union lb_udp_addr *a, const union lb_udp_addr *b)
{
    if (a->sa.sa_family != b->sa.sa_family)
        return false;
    if (a->sa.sa_family == AF_INET6)
        return a->in6.sin6_port == b->in6.sin6_port &&
               memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, sizeof(a->in6.sin6_addr)) == 0;
    return a->in.sin_port == b->in.sin_port && a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
}

struct lb_udp_table *
lb_udp_table_new(struct lb_worker *w, int fd)
{
    struct lb_udp_table *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->w = w;
    t->fd = fd;
    t->buckets = calloc(LB_UDP_BUCKETS_MIN, sizeof(*t->buckets));
    t->mask = LB_UDP_BUCKETS_MIN - 1;
    t->idle_ev = evtimer_new(w->base, lb_udp_on_idle, t);
    t->again_ev = evtimer_new(w->base, lb_udp_on_again, t);
    if (w->udp_buf == NULL)
        w->udp_buf = lb_worker_buf_get(w);
    t->buf = w->udp_buf != NULL ? w->udp_buf->data : NULL;
    if (t->buckets == NULL || t->idle_ev == NULL || t->again_ev == NULL || t->buf == NULL) {
        lb_udp_table_free(t, "");
        return NULL;
    }
    return t;
}

void
lb_udp_table_use(struct lb_udp_table *t, struct lb_gen *g, struct lb_frontend *fe)
{
    t->gen = g;
    t->fe = fe;
    lb_udp_idle_arm(t, lb_mono_ms());   /* a new udp_idle_timeout, at once */
}

static struct lb_flow *
lb_udp_find(const struct lb_udp_table *t, const union lb_udp_addr *a, uint32_t hash)
{
    for (struct lb_flow *f = t->buckets[hash & t->mask]; f != NULL; f = f->hnext) {
        if (f->hash == hash && lb_udp_addr_equal(&f->client, a))
            return f;
    }
    return NULL;
}

/* Doubles the buckets past one flow per bucket; out of memory, the chains
 * grow longer instead. */
static void
lb_udp_grow(struct lb_udp_table *t)
{
    size_t n = (t->mask + 1) * 2;
    struct lb_flow **b = calloc(n, sizeof(*b));

    if (b == NULL)
        return;
    for (size_t i = 0; i <= t->mask; i++) {
        for (struct lb_flow *f = t->buckets[i], *next; f != NULL; f = next) {
            next = f->hnext;
            f->hnext = b[f->hash & (n - 1)];
            b[f->hash & (n - 1)] = f;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->mask = n - 1;
}

static void
lb_lru_unlink(struct lb_udp_table *t, struct lb_flow *f)
{
    if (f->newer != NULL)
        f->newer->older = f->older;
    else
        t->newest = f->older;
    if (f->older != NULL)
        f->older->newer = f->newer;
    else
        t->oldest = f->newer;
    f->newer = f->older = NULL;
}

static void
lb_lru_push(struct lb_udp_table *t, struct lb_flow *f)
{
    f->older = t->newest;
    f->newer = NULL;
    if (t->newest != NULL)
        t->newest->newer = f;
    t->newest = f;
    if (t->oldest == NULL)
        t->oldest = f;
}

/* The idle timer fires at the oldest flow's end; a flow that moved up the
 * list since makes it fire early, and the sweep arms it again. */
static void
lb_udp_idle_arm(struct lb_udp_table *t, uint64_t now)
{
    uint64_t idle = t->fe->conf->udp_idle_timeout_ms, end;
    struct timeval tv;

    if (t->oldest == NULL) {
        event_del(t->idle_ev);
        return;
    }
    end = t->oldest->last_ms + idle;
    tv = lb_tv_ms(end > now ? end - now : 0);
    event_add(t->idle_ev, &tv);
}

/* ----------------------------------------------------------------- flows */

/* Takes f off whichever list of flows to read again holds it. */
static void
lb_again_unlink(struct lb_udp_table *t, struct lb_flow *f)
{
    struct lb_flow **p = &t->again;

    while (*p != NULL && *p != f)
        p = &(*p)->again_next;
    if (*p == NULL) {
        for (p = &t->again_now; *p != f; p = &(*p)->again_next)
            ;
    }
    *p = f->again_next;
}

static void
lb_flow_end(struct lb_flow *f, const char *why)
{
    struct lb_udp_table *t = f->t;
    struct lb_flow **p = &t->buckets[f->hash & t->mask];
    struct lb_server *srv = f->server;
    struct lb_fe_stats *st = f->fe->stats;

    if (t->fe->conf->log_flows) {
        char client[64];

        lb_log(CONF_LOG_INFO, "flow_end",
               "frontend=%s server=%s client=%s reason=%s datagrams_in=%llu datagrams_out=%llu "
               "bytes_in=%llu bytes_out=%llu duration_ms=%llu", f->fe->conf->name,
               srv->conf->name, lb_net_addr_text(&f->client.sa, client, sizeof(client)), why,
               (unsigned long long)f->datagrams_in, (unsigned long long)f->datagrams_out,
               (unsigned long long)f->bytes_in, (unsigned long long)f->bytes_out,
               (unsigned long long)(lb_mono_ms() - f->start_ms));
    }
    while (*p != f)
        p = &(*p)->hnext;
    *p = f->hnext;
    if (f->is_again)
        lb_again_unlink(t, f);
    lb_lru_unlink(t, f);
    t->nflows--;
    close(f->fd);                       /* leaves io_fd */
    lb_queue_release_slot(srv->pool, srv->index);
    atomic_fetch_sub_explicit(&st->udp_flows, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&st->active_connections, 1, memory_order_relaxed);
    lb_gen_unref(f->gen);
    free(f);
}

/* A socket connected to the flow's server; -1 with errno. */
static int
lb_flow_socket(const struct conf_server_addr *to)
{
    int fd = socket(to->sa.sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd >= 0 && connect(fd, &to->sa.sa, to->len) == -1) {
        int e = errno;

        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Puts a new flow's socket into the worker's epoll set, edge-triggered as
 * the sessions' sockets (session.c): added once and left by close, one
 * epoll_ctl a flow instead of libevent's add and delete. */
static int
lb_flow_watch(struct lb_udp_table *t, struct lb_flow *f, int fd)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLET,
                              .data.ptr = (void *)((uintptr_t)f | LB_IO_FLOW) };

    return epoll_ctl(t->w->io_fd, EPOLL_CTL_ADD, fd, &ev);
}

/* Reserves one of the frontend's udp_max_flows for a new flow, evicting
 * this worker's least recently used flows while the frontend is full (each
 * worker evicts only its own, without a lock; one with none left drops).
 * The count is taken before the flow exists, by compare-and-swap, so two
 * workers cannot both take the last one. */
static bool
lb_udp_reserve(struct lb_udp_table *t)
{
    struct lb_fe_stats *st = t->fe->stats;
    uint32_t max = t->fe->conf->udp_max_flows;
    uint32_t held;

    for (;;) {
        uint32_t cur = atomic_load_explicit(&st->udp_flows, memory_order_relaxed);

        while (cur < max)
            if (atomic_compare_exchange_weak_explicit(&st->udp_flows, &cur, cur + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                return true;
        if (t->oldest == NULL)
            return false;
        atomic_fetch_add_explicit(&st->udp_flows_evicted, 1, memory_order_relaxed);
        if (lb_log_limit_take(&lb_udp_full_limit, &held))
            lb_log(CONF_LOG_WARN, "udp_flows_full", "frontend=%s udp_max_flows=%u "
                   "evicted=%llu suppressed=%u", t->fe->conf->name, max,
                   (unsigned long long)atomic_load_explicit(&st->udp_flows_evicted,
                                                            memory_order_relaxed), held);
        lb_flow_end(t->oldest, "evicted");
    }
}

static void
lb_udp_drop(struct lb_frontend *fe, enum lb_udp_drop why)
{
    atomic_fetch_add_explicit(&fe->stats->udp_dropped[why], 1, memory_order_relaxed);
}

/* A new flow for a client's first datagram: NULL (counted) when it is
 * denied, no server takes it, or no socket can be had. */
static struct lb_flow *
lb_flow_new(struct lb_udp_table *t, const union lb_udp_addr *client, socklen_t len,
            uint32_t hash, uint64_t now)
{
    struct lb_frontend *fe = t->fe;
    struct lb_pool *pool = fe->pool;
    struct lb_server *srv;
    struct lb_flow *f;
    bool is_again;
    int idx, fd;

    if (lb_access_acl(fe->conf, &client->sa) != LB_DENY_NONE) {
        atomic_fetch_add_explicit(&fe->stats->denied[LB_DENY_ACL], 1, memory_order_relaxed);
        lb_udp_drop(fe, LB_UDP_DROP_DENIED);
        return NULL;
    }
    if (!lb_udp_reserve(t)) {
        lb_udp_drop(fe, LB_UDP_DROP_TOO_MANY_FLOWS);
        return NULL;
    }
    idx = bal_pick_attempt(pool->bal, t->w->cursors[pool->index], lb_client_hash(&client->sa),
                           NULL, 0, &is_again);
    if (idx < 0) {
        atomic_fetch_sub_explicit(&fe->stats->udp_flows, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&fe->stats->no_server, 1, memory_order_relaxed);
        lb_udp_drop(fe, LB_UDP_DROP_NO_SERVER);
        return NULL;
    }
    srv = &pool->servers[idx];
    fd = lb_flow_socket(&srv->conf->addr);
    /* out of descriptors: the oldest flow of this worker gives its own */
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && t->oldest != NULL) {
        lb_flow_end(t->oldest, "evicted");
        atomic_fetch_add_explicit(&fe->stats->udp_flows_evicted, 1, memory_order_relaxed);
        fd = lb_flow_socket(&srv->conf->addr);
    }
    f = fd >= 0 ? calloc(1, sizeof(*f)) : NULL;
    if (f == NULL || lb_flow_watch(t, f, fd) == -1) {
        char qbuf[128];

        lb_log_limited(&lb_udp_error_limit, CONF_LOG_WARN, "udp_flow_failed",
                       "frontend=%s server=%s error=%s", fe->conf->name, srv->conf->name,
                       lb_log_quote(qbuf, sizeof(qbuf), fd < 0 || f != NULL ? strerror(errno)
                                                                           : "out of memory"));
        if (fd >= 0)
            close(fd);
        free(f);
        lb_queue_release_slot(pool, (size_t)idx);
        atomic_fetch_sub_explicit(&fe->stats->udp_flows, 1, memory_order_relaxed);
        lb_udp_drop(fe, LB_UDP_DROP_NO_SOCKET);
        return NULL;
    }
    f->t = t;
    f->gen = t->gen;
    lb_gen_ref(f->gen);
    f->fe = fe;
    f->server = srv;
    f->fd = fd;
    f->hash = hash;
    f->client = *client;
    f->client_len = len;
    f->start_ms = f->last_ms = now;
    f->hnext = t->buckets[hash & t->mask];
    t->buckets[hash & t->mask] = f;
    lb_lru_push(t, f);
    if (++t->nflows > t->mask + 1)
        lb_udp_grow(t);
    if (t->nflows == 1)
        lb_udp_idle_arm(t, now);
    atomic_fetch_add_explicit(&fe->stats->udp_flows_total, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&fe->stats->active_connections, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&fe->stats->total_connections, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&srv->b->total_connections, 1, memory_order_relaxed);
    return f;
}

static void
lb_flow_touch(struct lb_flow *f, uint64_t now)
{
    f->last_ms = now;
    if (f->t->newest != f) {
        lb_lru_unlink(f->t, f);
        lb_lru_push(f->t, f);
    }
}

/* The server's port is closed (an ICMP error came back on the flow's
 * socket): a failed connect, as TCP's refused one, for observe_errors. */
static void
lb_flow_refused(struct lb_flow *f)
{
    lb_server_connect_failed(f->t->w, f->server, BAL_OUTLIER_CONNECT_REFUSED);
    lb_flow_end(f, "refused");
}

/* Replies from the server, to the client from the listening socket: all
 * that the socket holds (its readiness is an edge, not said again), but at
 * most LB_UDP_BATCH in a turn, the rest in the next (lb_udp_on_again). */
static void
lb_flow_read(struct lb_flow *f)
{
    struct lb_udp_table *t = f->t;
    struct lb_fe_stats *st = f->fe->stats;
    struct lb_backend *b = f->server->b;
    uint32_t responses = t->fe->conf->udp_responses;

    for (int i = 0; i < LB_UDP_BATCH; i++) {
        ssize_t n = recv(f->fd, t->buf, LB_BUF_SIZE, 0);

        if (n < 0 && errno == ECONNREFUSED) {
            lb_flow_refused(f);
            return;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n < 0)
            continue;                   /* another ICMP error, which this read
                                           took: the replies behind it next */
        atomic_fetch_add_explicit(&b->udp_datagrams_received, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->bytes_in, (uint64_t)n, memory_order_relaxed);
        if (sendto(t->fd, t->buf, (size_t)n, 0, &f->client.sa, f->client_len) < 0) {
            lb_udp_drop(f->fe, LB_UDP_DROP_SEND_FAILED);
        } else {
            f->datagrams_out++;
            f->bytes_out += (uint64_t)n;
            atomic_fetch_add_explicit(&st->udp_datagrams_sent, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&st->udp_bytes_sent, (uint64_t)n, memory_order_relaxed);
        }
        /* nginx's proxy_responses: responses replies for each datagram the
         * client sent, so queries in flight together (a resolver's A and
         * AAAA) are all answered before the flow ends */
        if (responses != 0 && ++f->replies >= (uint64_t)responses * f->datagrams_in) {
            lb_flow_end(f, "responses");
            return;
        }
        lb_flow_touch(f, lb_mono_ms());
    }
    /* A timer of 0, as the sessions' (session.c): a server that always has
     * more must not keep the loop from its other events. */
    if (t->again == NULL)
        (void)event_add(t->again_ev, &(struct timeval){ 0, 0 });
    f->is_again = true;
    f->again_next = t->again;
    t->again = f;
}

void
lb_udp_on_flow_io(struct lb_flow *f)
{
    if (!f->is_again)
        lb_flow_read(f);
}

static void
lb_udp_on_again(evutil_socket_t fd, short what, void *arg)
{
    struct lb_udp_table *t = arg;
    struct lb_flow *f;

    /* What asks again from here on waits for the next turn. The list
     * being read stays in the table: a flow that ends meanwhile, by
     * whatever path, leaves it (lb_flow_end). */
    t->again_now = t->again;
    t->again = NULL;
    while ((f = t->again_now) != NULL) {
        t->again_now = f->again_next;
        f->is_again = false;
        lb_flow_read(f);
    }
}

/* Datagrams from clients: each to its flow's server. */
void
lb_udp_on_datagrams(evutil_socket_t fd, short what, void *arg)
{
    struct lb_udp_table *t = arg;
    struct lb_fe_stats *st = t->fe->stats;
    uint64_t now = lb_mono_ms();

    for (int i = 0; i < LB_UDP_BATCH; i++) {
        union lb_udp_addr client;
        socklen_t len = sizeof(client);
        ssize_t n = recvfrom(fd, t->buf, LB_BUF_SIZE, 0, &client.sa, &len);
        uint32_t hash;
        struct lb_flow *f;

        if (n < 0)
            return;                     /* EAGAIN; nothing else is ours */
        atomic_fetch_add_explicit(&st->udp_datagrams_received, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&st->udp_bytes_received, (uint64_t)n, memory_order_relaxed);
        hash = lb_udp_hash(&client);
        f = lb_udp_find(t, &client, hash);
        if (f != NULL && atomic_load_explicit(&f->server->b->is_failing, memory_order_relaxed)) {
            lb_flow_end(f, "server_down");
            f = NULL;
        }
        if (f == NULL && (f = lb_flow_new(t, &client, len, hash, now)) == NULL)
            continue;
        lb_flow_touch(f, now);
        if (send(f->fd, t->buf, (size_t)n, 0) < 0) {
            lb_udp_drop(f->fe, LB_UDP_DROP_SEND_FAILED);
            if (errno == ECONNREFUSED)
                lb_flow_refused(f);
            continue;
        }
        /* relayed only: udp_responses waits for replies to these */
        f->datagrams_in++;
        f->bytes_in += (uint64_t)n;
        atomic_fetch_add_explicit(&f->server->b->udp_datagrams_sent, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&f->server->b->bytes_out, (uint64_t)n, memory_order_relaxed);
    }
}

static void
lb_udp_on_idle(evutil_socket_t fd, short what, void *arg)
{
    struct lb_udp_table *t = arg;
    uint64_t now = lb_mono_ms(), idle = t->fe->conf->udp_idle_timeout_ms;

    while (t->oldest != NULL && t->oldest->last_ms + idle <= now)
        lb_flow_end(t->oldest, "idle");
    lb_udp_idle_arm(t, now);
}

void
lb_udp_drain_scan(struct lb_udp_table *t, uint64_t now, uint64_t *next)
{
    for (struct lb_flow *f = t->oldest, *newer; f != NULL; f = newer) {
        uint64_t deadline = atomic_load(&f->server->b->drain_deadline_ms);

        newer = f->newer;
        if (deadline != 0 && deadline <= now) {
            atomic_fetch_add_explicit(&f->server->b->drained_by_timeout, 1,
                                      memory_order_relaxed);
            lb_flow_end(f, "drained");
        } else if (deadline != 0 && (*next == 0 || deadline < *next)) {
            *next = deadline;
        }
    }
}

void
lb_udp_table_free(struct lb_udp_table *t, const char *why)
{
    if (t == NULL)
        return;
    while (t->oldest != NULL)
        lb_flow_end(t->oldest, why);
    if (t->idle_ev != NULL)
        event_free(t->idle_ev);
    if (t->again_ev != NULL)
        event_free(t->again_ev);
    free(t->buckets);
    free(t);
}
