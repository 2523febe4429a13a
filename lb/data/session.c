/*
 * session.c - one client connection: pick a server, connect (with retries on
 * other servers), relay bytes both ways, close.
 *
 * Lifecycle (one state field, one exit; a frontend with accept_proxy reads
 * the client's PROXY header first, HEADER, and one with routes its
 * ClientHello's server name, HELLO, before it knows the pool):
 *
 *   accept --> CONNECTING --connected--> RELAYING --both sides shut,
 *               ^  |  |   ^                     |        an error, idle_timeout,
 *        granted|  |  |   | connect failed:     |        shutdown_timeout
 *      a slot   |  v  |   | next server         v
 *             QUEUED  +---+------------------> lb_session_finish()  (frees)
 *   every server at  \   no server / attempts used up     ^
 *   max_connections   +---- queue_timeout ---------------+
 *
 * Relay: each direction (a "half") reads into a buffer and writes it out at
 * once; the buffer goes back to the worker when empty, so an idle session
 * holds no buffer. When the writer cannot take everything, the half stops
 * reading its source until the rest is written: at most one buffer per
 * direction is ever held (backpressure), the rest waits in the kernel's
 * socket buffers and TCP's window. EOF on one side is passed on with
 * shutdown(SHUT_WR) while the other direction goes on (half-close).
 *
 * Socket events: a session's two sockets are not libevent events but
 * members of the worker's own epoll set (io_fd), edge-triggered for reading
 * and writing, added once and left by close(2) alone; libevent watches that
 * set as one descriptor (lb_session_dispatch). Switching read and write
 * interest through libevent cost 6 epoll_ctl a connection and an event
 * structure per direction; this costs 2 and none, and the raw epoll flags
 * tell a reset or a FIN (EPOLLHUP, EPOLLRDHUP) that libevent folds into
 * "readable". Edge-triggered means a readiness not acted on is not reported
 * again: a half blocked on its destination reads its source once it has
 * flushed, a read that stops at the budget is put on the worker's "again"
 * list, and a read shorter than the buffer has emptied the socket. After
 * the peer's FIN, that short read is the EOF too (lb_peer_end); after a
 * reset, the reads go on to the error, for which no new edge would come.
 *
 * Everything here runs on the worker thread that accepted the connection.
 * lb_session_finish frees the session: every caller returns right after it.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
/* Sessions embed their events (event_assign) so that a session is one
 * allocation; that ties us to the libevent ABI we build against, which the
 * distribution package pins. */
#include <event2/event_struct.h>

#include "daemon.h"
#include "data.h"
#include "state.h"

enum lb_session_state {
    LB_SESSION_HEADER = 0,          /* reading a PROXY header (accept_proxy) */
    LB_SESSION_HELLO,               /* reading a ClientHello (routes) */
    LB_SESSION_CONNECTING,
    LB_SESSION_QUEUED,              /* waiting for a slot (queue.c) */
    LB_SESSION_RELAYING,
};

static const char *const lb_session_state_names[] = {
    [LB_SESSION_HEADER] = "header",
    [LB_SESSION_HELLO] = "hello",
    [LB_SESSION_CONNECTING] = "connecting",
    [LB_SESSION_QUEUED] = "queued",
    [LB_SESSION_RELAYING] = "relaying",
};

/* A socket address of either family, in the room an IPv6 one takes. */
union lb_sockaddr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

#define LB_IO_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)
#define LB_IO_ENDING (EPOLLRDHUP | EPOLLHUP | EPOLLERR)

/* How a socket's peer ended, from the raw epoll flags. A FIN alone
 * (EPOLLRDHUP without EPOLLERR) comes after every byte the peer sent, so
 * a read shorter than the buffer has taken them all: that is the EOF,
 * without a read for the 0 (HAProxy concludes the same from a short read
 * after a HUP). After a reset or an error, the reads go on until they
 * return it, so that it is passed on as an error, not as a FIN. */
enum lb_peer_end { LB_PEER_OPEN, LB_PEER_FIN, LB_PEER_FAILED };

static enum lb_peer_end
lb_peer_end(enum lb_peer_end was, uint32_t events)
{
    if (!(events & LB_IO_ENDING))
        return was;
    if ((events & (EPOLLRDHUP | EPOLLERR)) == EPOLLRDHUP && was != LB_PEER_FAILED)
        return LB_PEER_FIN;
    return LB_PEER_FAILED;
}

/* One direction of the relay. */
struct lb_half {
    struct lb_session *s;
    int src_fd, dst_fd;
    struct lb_buf *buf;             /* held only while bytes are pending */
    struct lb_pipe *pipe;           /* the same, when splicing */
    uint32_t off, len;              /* pending bytes: buf->data[off..off+len)
                                       or len bytes in pipe */
    enum lb_peer_end src_end;       /* what src reported (lb_peer_end) */
    bool is_upstream;               /* client -> server */
    bool is_splice;                 /* moves bytes with splice(2) */
    bool is_shut;                   /* src's EOF passed on to dst */
    bool is_header_held;            /* buf holds the PROXY header alone,
                                       waiting for the client's first bytes */
    uint64_t bytes;
};

#define LB_IO_BATCH 64

/* Allocated in one block at accept (with the tried[] list) and freed in one
 * place, lb_session_finish. Owned by its worker thread. */
struct lb_session {
    struct lb_worker *w;
    struct lb_session *prev, *next; /* the worker's list */
    struct lb_gen *gen;             /* one reference */
    struct lb_frontend *fe;
    struct lb_pool *pool;           /* NULL until routed (HELLO) */
    struct lb_server *server;       /* picked and counted, or NULL */
    enum lb_session_state state;
    int cfd, sfd;
    struct event timer;
    struct lb_half up;              /* client -> server */
    struct lb_half down;            /* server -> client */
    uint64_t started_ms;
    uint64_t last_active_ms;
    uint64_t first_sent_ms;         /* the client's first byte for the
                                       server, 0 = none yet (relaying) */
    bool is_first_byte_watched;     /* first_byte_timeout: the server has
                                       not answered yet, nor been blamed */
    bool is_blamed;                 /* a live error of its server counted
                                       (once a session: a request that
                                       timed out, then was reset, is one) */
    uint64_t id;                    /* session_end's id=, v2's UNIQUE_ID */
    union lb_sockaddr client;       /* the peer, or its PROXY header's source */
    union lb_sockaddr local;        /* where it connected (the header's
                                       destination); family 0 until asked */
    char client_text[64];
    uint64_t client_hash;
    struct lb_sources *sources;     /* where its source is counted, or NULL */
    struct lb_source_ref source;
    bool is_client_watched;         /* cfd joined io_fd before the relay
                                       (to read a PROXY header or a
                                       ClientHello) */
    enum lb_peer_end client_end;    /* ... and what it reported */
    uint32_t hello_need;            /* HELLO: bytes to wait for before the
                                       next peek (0: peek at once) */
    char *sni;                      /* the name it was routed by, or NULL */
    uint32_t ntried;
    uint32_t nagain;                /* attempts on a server tried before */
    bool is_paused;                 /* waiting out bal_retry_pause_ms */
    bool is_syn_grace;              /* this attempt's deadline was moved
                                       past a SYN retransmission */
    uint64_t attempt_us;            /* when this socket's connect began */
    uint64_t connect_due_ms;        /* this attempt's connect_timeout,
                                       waiting for its turn included */
    uint64_t due_ms;                /* when the armed timer is due */
    struct lb_waiter wait;          /* QUEUED */
    const char *abort_reason;       /* aborted while its grant was on the
                                       way: closes when it arrives */
    struct lb_session *pace_prev, *pace_next;   /* waiting for its turn
                                                   to connect */
    bool is_pace_waiting;           /* ... on its server's pace list */
    bool is_pace_counted;           /* its connect counts in the window */
    uint8_t nstalls;                /* this attempt's stalled dials */
    struct lb_session *again_next;  /* the worker's again list */
    uint8_t again;                  /* halves to read on: LB_AGAIN_* */
    bool is_done;                   /* finished; freed after the dispatch */
    uint32_t tried[];               /* pool retries + 1 */
};

/* Events a single client can cause, each rate-limited on its own (see
 * lb_log_limited): a burst of refused clients must not become a burst of
 * log lines. */
static struct lb_log_limit lb_no_server_limit = LB_LOG_LIMIT(LB_LOG_CLIENT_EVENTS_PER_S);
static struct lb_log_limit lb_connect_failed_limit = LB_LOG_LIMIT(LB_LOG_CLIENT_EVENTS_PER_S);
static struct lb_log_limit lb_session_failed_limit = LB_LOG_LIMIT(LB_LOG_CLIENT_EVENTS_PER_S);
static struct lb_log_limit lb_queue_timeout_limit = LB_LOG_LIMIT(LB_LOG_CLIENT_EVENTS_PER_S);
static struct lb_log_limit lb_denied_limit = LB_LOG_LIMIT(LB_LOG_CLIENT_EVENTS_PER_S);
static struct lb_log_limit lb_header_bad_limit = LB_LOG_LIMIT(LB_LOG_CLIENT_EVENTS_PER_S);

#define LB_AGAIN_UP 1
#define LB_AGAIN_DOWN 2

static void lb_session_connect(struct lb_session *s);
static void lb_session_hello_begin(struct lb_session *s);
static bool lb_session_dial(struct lb_session *s);
static void lb_pace_done(struct lb_session *s);
static void lb_pace_answered(struct lb_session *s);
static void lb_pace_unlink(struct lb_session *s);
static void lb_session_queue(struct lb_session *s);
static void lb_session_on_connect(struct lb_session *s, uint32_t events);
static void lb_session_on_timer(evutil_socket_t fd, short what, void *arg);
static uint64_t lb_session_relay_wait(const struct lb_session *s, uint64_t now);
static void lb_session_on_io(struct lb_session *s, bool is_server, uint32_t events);
static void lb_session_finish(struct lb_session *s, const char *reason);
static void lb_session_read_again(struct lb_session *s, uint8_t half);
static int lb_session_watch(struct lb_session *s, int fd, uintptr_t side);
static bool lb_half_read(struct lb_half *h);
static bool lb_half_send_held(struct lb_half *h);
static void lb_half_count(struct lb_half *h, size_t n);
static void lb_half_release(struct lb_half *h);

/* Arms the session's one timer ms from now. The workers' loops run on
 * libevent's coarse clock (its precise one costs a timerfd_settime every
 * loop turn), which can fire a timer some ms early; the deadline is kept
 * on the precise clock and lb_session_on_timer waits out the rest. */
static int
lb_session_arm(struct lb_session *s, uint64_t ms)
{
    struct timeval tv = lb_tv_ms(ms);

    s->due_ms = lb_mono_ms() + ms;
    return event_add(&s->timer, &tv);
}

static void
lb_session_nodelay(int fd)
{
    int one = 1;

    /* A proxy must not add Nagle's delay to small request/response writes. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

uint64_t
lb_client_hash(const struct sockaddr *sa)
{
    /* The address without the port: one client keeps its server. */
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        return bal_hash_bytes(&in6->sin6_addr, sizeof(in6->sin6_addr));
    }
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    return bal_hash_bytes(&in->sin_addr, sizeof(in->sin_addr));
}

/* A session's id: unique in the process (the worker's id and its count,
 * through a bijective mix), different across processes (the salt), and
 * not a count an outsider could read the traffic from. */
static uint64_t lb_session_salt;

void
lb_session_salt_init(void)
{
    if (getrandom(&lb_session_salt, sizeof(lb_session_salt), 0) != sizeof(lb_session_salt))
        lb_session_salt = lb_mono_us() ^ ((uint64_t)getpid() << 32);
}

static uint64_t
lb_session_new_id(struct lb_worker *w)
{
    uint64_t x = (((uint64_t)w->id << 56) | (++w->session_seq & ((UINT64_C(1) << 56) - 1))) ^
                 lb_session_salt;

    /* splitmix64's finaliser: each step is invertible. */
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* A client refused by the frontend's access rules (rule: which list, when
 * it is not allow or deny). */
static void
lb_session_denied(struct lb_frontend *fe, const char *client_text, enum lb_deny_reason why,
                  const char *rule)
{
    atomic_fetch_add_explicit(&fe->stats->denied[why], 1, memory_order_relaxed);
    lb_log_limited(&lb_denied_limit, CONF_LOG_INFO, "denied", "frontend=%s client=%s reason=%s%s%s",
                   fe->conf->name, client_text, lb_deny_reason_name(why),
                   rule != NULL ? " rule=" : "", rule != NULL ? rule : "");
}

/* Whether the client at sa may connect to fe: its allow and deny lists,
 * then its per-source limits, whose count then holds a place for it
 * (*table and *ref, given back by lb_session_finish). */
static enum lb_deny_reason
lb_session_admit(struct lb_frontend *fe, const struct sockaddr *sa, struct lb_sources **table,
                 struct lb_source_ref *ref)
{
    const struct conf_frontend *fc = fe->conf;
    enum lb_deny_reason why = lb_access_acl(fc, sa);

    *table = NULL;
    if (why != LB_DENY_NONE || (fc->max_connections_per_source == 0 && fc->rate_per_source == 0))
        return why;
    /* The generation made the table when it set a limit (gen.c). */
    why = lb_sources_enter(fe->stats->sources, fc, sa, lb_mono_ms(), ref);
    if (why == LB_DENY_NONE)
        *table = fe->stats->sources;
    return why;
}

static void
lb_session_set_client(struct lb_session *s, const struct sockaddr *sa)
{
    size_t len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                           : sizeof(struct sockaddr_in);

    memcpy(&s->client, sa, len);
    lb_net_addr_text(sa, s->client_text, sizeof(s->client_text));
}

/* Into the queue behind those who wait, or to a server, once the pool is
 * known. */
static void
lb_session_go(struct lb_session *s)
{
    if (s->pool->bal->algo == BAL_ALGO_SOURCE)
        s->client_hash = lb_client_hash(&s->client.sa);
    s->state = LB_SESSION_CONNECTING;
    /* First come, first served: while clients wait for a slot, a new one
     * queues behind them rather than take the next slot that frees. */
    if (atomic_load_explicit(&s->pool->shared->queue.depth, memory_order_relaxed) != 0) {
        lb_session_queue(s);
        return;
    }
    lb_session_connect(s);
}

void
lb_session_start(struct lb_worker *w, struct lb_gen *gen, struct lb_frontend *fe, int fd,
                 const struct sockaddr *client)
{
    const struct conf_frontend *fc = fe->conf;
    uint32_t attempts = fe->max_attempts;
    struct lb_sources *table = NULL;
    struct lb_source_ref ref = { LB_SOURCE_UNTRACKED };
    enum lb_deny_reason why;
    struct lb_session *s;

    /* Refused before anything is spent on the client. Behind a balancer
     * that sends PROXY headers only it may connect, and the rules apply to
     * the client its header names (lb_session_read_header). */
    if (fc->accept_proxy != CONF_PROXY_OFF)
        why = lb_cidrs_match(&fc->accept_proxy_from, client) ? LB_DENY_NONE : LB_DENY_ACL;
    else
        why = lb_session_admit(fe, client, &table, &ref);
    if (why != LB_DENY_NONE) {
        char text[64];

        lb_session_denied(fe, lb_net_addr_text(client, text, sizeof(text)), why,
                          fc->accept_proxy != CONF_PROXY_OFF ? "accept_proxy_from" : NULL);
        close(fd);
        lb_limit_release(w->daemon);
        return;
    }
    s = calloc(1, sizeof(*s) + attempts * sizeof(uint32_t));
    if (s == NULL) {
        lb_log_limited(&lb_session_failed_limit, CONF_LOG_ERROR, "session_failed",
                       "frontend=%s error=\"out of memory\"", fc->name);
        if (table != NULL)
            lb_sources_leave(table, &ref);
        close(fd);
        lb_limit_release(w->daemon);
        return;
    }
    s->w = w;
    s->gen = gen;
    lb_gen_ref(s->gen);
    s->fe = fe;
    s->pool = fe->pool;
    s->cfd = fd;
    s->sfd = -1;
    s->id = lb_session_new_id(w);
    s->sources = table;
    s->source = ref;
    lb_session_set_client(s, client);
    s->started_ms = s->last_active_ms = lb_mono_ms();
    /* No TCP_NODELAY here: Linux copies it from the listening socket. */

    /* Assigned once here, so finish can event_del it whatever state the
     * session reached. */
    event_assign(&s->timer, w->base, -1, 0, lb_session_on_timer, s);

    s->next = w->sessions;
    if (w->sessions != NULL)
        w->sessions->prev = s;
    w->sessions = s;
    w->nsessions++;
    atomic_fetch_add_explicit(&fe->stats->active_connections, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&fe->stats->total_connections, 1, memory_order_relaxed);

    if (fc->accept_proxy != CONF_PROXY_OFF) {
        s->state = LB_SESSION_HEADER;
        s->is_client_watched = true;
        if (lb_session_watch(s, s->cfd, 0) == -1 ||
            lb_session_arm(s, fc->accept_proxy_timeout_ms) == -1)
            lb_session_finish(s, "event_add failed");
        return;
    }
    if (s->pool == NULL) {
        lb_session_hello_begin(s);
        return;
    }
    lb_session_go(s);
}

/* -------------------------------------------------------- a PROXY header
 *
 * Read with MSG_PEEK, whole from its first byte each time more arrives (a
 * header is at most LB_PROXY_HEADER_MAX bytes, so a parser that keeps no
 * state is cheap), and taken off the socket only once complete: what
 * follows stays in the kernel for the relay, as HAProxy reads it. */

static void
lb_session_header_bad(struct lb_session *s, enum lb_proxy_bad bad)
{
    atomic_fetch_add_explicit(&s->fe->stats->proxy_bad[bad], 1, memory_order_relaxed);
    lb_log_limited(&lb_header_bad_limit, CONF_LOG_WARN, "proxy_header_bad",
                   "frontend=%s client=%s reason=%s", s->fe->conf->name, s->client_text,
                   lb_proxy_bad_name(bad));
    lb_session_finish(s, "bad PROXY header");
}

static void
lb_session_read_header(struct lb_session *s, uint32_t events)
{
    uint8_t buf[LB_PROXY_HEADER_MAX];
    struct lb_proxy_addrs a;
    enum lb_proxy_bad bad;
    enum lb_deny_reason why;
    ssize_t n;
    int len;

    s->client_end = lb_peer_end(s->client_end, events);
    n = recv(s->cfd, buf, sizeof(buf), MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        lb_session_header_bad(s, LB_PROXY_CLOSED);
        return;
    }
    len = lb_proxy_parse(buf, (size_t)n, s->fe->conf->accept_proxy, &a, &bad);
    if (len == 0 && (s->client_end != LB_PEER_OPEN || (size_t)n == sizeof(buf))) {
        len = -1;           /* no more will come, or no room for it */
        bad = (size_t)n == sizeof(buf) ? LB_PROXY_TOO_LONG : LB_PROXY_CLOSED;
    }
    if (len == 0)
        return;
    if (len < 0) {
        lb_session_header_bad(s, bad);
        return;
    }
    if (recv(s->cfd, buf, (size_t)len, 0) != len) {
        lb_session_finish(s, "client error");
        return;
    }
    event_del(&s->timer);
    if (!a.is_local) {
        lb_session_set_client(s, (const struct sockaddr *)&a.src);
        memcpy(&s->local, &a.dst, a.dst.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                            : sizeof(struct sockaddr_in));
    }
    why = lb_session_admit(s->fe, &s->client.sa, &s->sources, &s->source);
    if (why != LB_DENY_NONE) {
        lb_session_denied(s->fe, s->client_text, why, NULL);
        lb_session_finish(s, "denied");
        return;
    }
    if (s->pool == NULL) {
        lb_session_hello_begin(s);
        return;
    }
    lb_session_go(s);
}

/* ----------------------------------------------------- a ClientHello
 *
 * Routed by name: the ClientHello is read with MSG_PEEK into a relay
 * buffer of the worker for the moment of the read, and left in the kernel
 * for the server, which gets every byte as the client sent it; the session
 * holds no buffer while it waits (Envoy's tls_inspector keeps 64 KiB per
 * connection). The reader keeps no state and reads from the first byte each
 * time, so it says how many bytes it wants next (hello_need), and a hello
 * that comes a byte at a time is peeked at again only when that many are
 * queued (FIONREAD), once per field or record, not per byte. */

static void
lb_session_routed(struct lb_session *s, struct lb_pool *pool)
{
    event_del(&s->timer);
    if (pool == NULL) {
        lb_session_finish(s, "no route");
        return;
    }
    s->pool = pool;
    lb_session_go(s);
}

static void
lb_session_unroutable(struct lb_session *s, enum lb_sni_bad why, bool is_empty)
{
    lb_session_routed(s, lb_route_unroutable(s->fe, s->client_text, why, is_empty));
}

static void
lb_session_read_hello(struct lb_session *s, uint32_t events)
{
    size_t max = s->fe->conf->sni_max_bytes, need;
    char name[LB_SNI_NAME_MAX + 1];
    enum lb_sni_bad bad;
    struct lb_buf *buf;
    ssize_t n;
    int avail, rc;

    s->client_end = lb_peer_end(s->client_end, events);
    /* Joining io_fd reports the socket writable, before any byte came: no
     * peek for that (0: asked directly, after a PROXY header). */
    if (events != 0 && !(events & (EPOLLIN | LB_IO_ENDING)))
        return;
    if (s->hello_need != 0 && s->client_end == LB_PEER_OPEN &&
        (ioctl(s->cfd, FIONREAD, &avail) == -1 || (uint32_t)avail < s->hello_need))
        return;
    if ((buf = lb_worker_buf_get(s->w)) == NULL) {
        lb_session_finish(s, "out of memory");
        return;
    }
    n = recv(s->cfd, buf->data, max, MSG_PEEK);
    rc = n > 0 ? lb_hello_sni((const uint8_t *)buf->data, (size_t)n, max, name, &need, &bad)
               : 0;
    lb_worker_buf_put(s->w, buf);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n < 0) {
        lb_session_finish(s, "client error");
        return;
    }
    if (n == 0) {
        lb_session_unroutable(s, LB_SNI_TRUNCATED, true);
        return;
    }
    if (rc == 0 && s->client_end != LB_PEER_OPEN) {
        lb_session_unroutable(s, LB_SNI_TRUNCATED, false);
        return;
    }
    if (rc == 0) {
        s->hello_need = (uint32_t)need;
        return;
    }
    if (rc < 0) {
        lb_session_unroutable(s, bad, false);
        return;
    }
    if (name[0] != '\0' && (s->sni = strdup(name)) == NULL) {
        lb_session_finish(s, "out of memory");
        return;
    }
    lb_session_routed(s, lb_route_pick(s->fe, name));
}

/* Watches the client for its ClientHello, sni_timeout from now. After a
 * PROXY header the client is watched already, and what followed the
 * header may have come with it (no new edge): read at once. */
static void
lb_session_hello_begin(struct lb_session *s)
{
    bool is_watched = s->is_client_watched;

    s->state = LB_SESSION_HELLO;
    s->is_client_watched = true;
    if ((!is_watched && lb_session_watch(s, s->cfd, 0) == -1) ||
        lb_session_arm(s, s->fe->conf->sni_timeout_ms) == -1) {
        lb_session_finish(s, "event_add failed");
        return;
    }
    if (is_watched)
        lb_session_read_hello(s, 0);
}

/* ------------------------------------------------------------ connecting */

/* A connect the server refused or let time out, by a TCP session or a UDP
 * flow (an ICMP port unreachable). Detection from live traffic: every
 * observe_errors consecutive ones ask the health module for a probe now,
 * instead of waiting for the schedule. The probe decides; live errors alone
 * never take a server out. */
void
lb_server_connect_failed(struct lb_worker *w, struct lb_server *srv, enum bal_outlier_kind k)
{
    uint32_t every = srv->pool->conf->observe_errors;
    uint32_t n;
    /* published once built and running (checks.c) */
    struct hc *hc = atomic_load_explicit(&w->daemon->hc, memory_order_acquire);

    atomic_fetch_add_explicit(&srv->b->connect_failures, 1, memory_order_relaxed);
    lb_worker_live_error(w, srv, k, lb_mono_ms());      /* a new attempt */
    n = atomic_fetch_add_explicit(&srv->b->live_failures, 1, memory_order_relaxed) + 1;
    if (every == 0 || n % every != 0 || hc == NULL || srv->pool->conf->check == CONF_CHECK_NONE)
        return;
    atomic_fetch_add_explicit(&srv->b->observed_probes, 1, memory_order_relaxed);
    lb_log(CONF_LOG_INFO, "observe_probe", "pool=%s server=%s live_failures=%u",
           srv->pool->conf->name, srv->conf->name, n);
    hc_probe_now(hc, srv->b->id);
}

/* The attempt on s->server is over: its socket, place in the pace window
 * and server slot go back (the caller picks again). */
static void
lb_session_attempt_end(struct lb_session *s)
{
    struct lb_server *srv = s->server;

    event_del(&s->timer);
    lb_pace_done(s);
    if (s->sfd >= 0)
        close(s->sfd);                  /* before the slot goes back; leaves io_fd */
    s->sfd = -1;
    lb_queue_release_slot(s->pool, srv->index);
    s->server = NULL;
}

/* lb_session_connect_failed's fault for an attempt that failed through no
 * fault of the server. */
#define LB_NOT_THE_SERVERS BAL_OUTLIER_KINDS

/* How a connect that failed with errno err counts against its server:
 * what the server or the way to it answered, or nothing when this host
 * failed (no local port, no buffer, no memory), which would eject the
 * healthy servers of a busy node. */
static enum bal_outlier_kind
lb_connect_fault(int err)
{
    switch (err) {
    case ETIMEDOUT:
        return BAL_OUTLIER_CONNECT_TIMEOUT;
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
        return BAL_OUTLIER_CONNECT_REFUSED;
    default:
        return LB_NOT_THE_SERVERS;
    }
}

/* The attempt failed: logged and, unless fault is LB_NOT_THE_SERVERS,
 * counted against the server as that kind of error (connect_failures,
 * observe_errors, outlier). Its connect_timeout running out before its
 * turn to dial came is not the server's fault: no SYN was sent. */
static void
lb_session_connect_failed(struct lb_session *s, const char *error, enum bal_outlier_kind fault)
{
    struct lb_server *srv = s->server;
    char lower[96], qbuf[128];

    /* Operators read "connection refused", as the kernel's own messages
     * and haproxy's logs put it, not strerror's capitalised sentence. */
    snprintf(lower, sizeof(lower), "%s", error);
    lower[0] = (char)tolower((unsigned char)lower[0]);
    lb_log_limited(&lb_connect_failed_limit, CONF_LOG_WARN, "connect_failed",
                   "frontend=%s pool=%s server=%s addr=%s client=%s error=%s attempt=%u",
                   s->fe->conf->name, s->pool->conf->name, srv->conf->name,
                   srv->conf->addr.text, s->client_text,
                   lb_log_quote(qbuf, sizeof(qbuf), lower), s->ntried);
    if (fault != LB_NOT_THE_SERVERS)
        lb_server_connect_failed(s->w, srv, fault);
    lb_session_attempt_end(s);
}

/* Puts one of the session's sockets into the worker's epoll set. */
static int
lb_session_watch(struct lb_session *s, int fd, uintptr_t side)
{
    struct epoll_event ev = { .events = LB_IO_EVENTS,
                              .data.ptr = (void *)((uintptr_t)s | side) };

    return epoll_ctl(s->w->io_fd, EPOLL_CTL_ADD, fd, &ev);
}

/* How long the PROXY header waits for the client's first bytes: sent with
 * them it takes one segment, one send and one wakeup of the server instead
 * of two, and a client's request mostly follows its handshake within
 * microseconds. A server that speaks first (SMTP, MySQL) gets the header
 * alone when this runs out: its greeting comes this much later, up to a
 * tick of the loop's coarse clock more (README: 1.5-6 ms measured). */
#define LB_PROXY_HOLD_MS 1

/* A listener bound to one address accepts on that address only: its
 * connections' local address is known without getsockname(2). */
static bool
lb_sockaddr_is_wildcard(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return true;
}

/* Puts the server's PROXY header in the up half's buffer, held there for
 * the client's first bytes (lb_half_read_held) or LB_PROXY_HOLD_MS (the
 * session's timer), whichever comes first: the relay moves no client byte
 * before it. False when that ended the session. */
static bool
lb_session_hold_proxy_header(struct lb_session *s)
{
    struct lb_half *h = &s->up;
    const struct conf_addr *listen = &s->fe->conf->listen;
    struct lb_proxy_tlvs tlvs;
    char id[17];

    if (s->local.sa.sa_family == 0 && !lb_sockaddr_is_wildcard(&listen->ss)) {
        memcpy(&s->local, &listen->ss, listen->len);
    } else if (s->local.sa.sa_family == 0) {
        socklen_t alen = sizeof(s->local);

        if (getsockname(s->cfd, &s->local.sa, &alen) == -1) {
            lb_session_finish(s, "client error");
            return false;
        }
    }
    if ((h->buf = lb_worker_buf_get(s->w)) == NULL) {
        lb_session_finish(s, "out of memory");
        return false;
    }
    snprintf(id, sizeof(id), "%016llx", (unsigned long long)s->id);
    tlvs = (struct lb_proxy_tlvs){ .unique_id = id, .authority = s->sni };
    h->off = 0;
    h->len = (uint32_t)lb_proxy_build((uint8_t *)h->buf->data, s->server->conf->send_proxy,
                                      &s->client.sa, &s->local.sa, &tlvs);
    h->is_header_held = true;
    return true;
}

/* The server socket is connected (and watched): relay. events is what it
 * reported, acted on now since it will not be reported again. */
static void
lb_session_relay_start(struct lb_session *s, uint32_t events)
{
    s->state = LB_SESSION_RELAYING;
    event_del(&s->timer);
    lb_pace_answered(s);
    atomic_fetch_add_explicit(&s->server->b->total_connections, 1, memory_order_relaxed);
    lb_ahist_observe(&s->pool->shared->connect_time, lb_mono_us() - s->attempt_us);
    /* Read before writing: no cache-line ping-pong between workers in the
     * common case where the count is already 0. */
    if (atomic_load_explicit(&s->server->b->live_failures, memory_order_relaxed) != 0)
        atomic_store_explicit(&s->server->b->live_failures, 0, memory_order_relaxed);

    bool is_splice = s->pool->conf->splice == CONF_SPLICE_ON;

    s->up = (struct lb_half){ .s = s, .src_fd = s->cfd, .dst_fd = s->sfd,
                              .is_upstream = true, .is_splice = is_splice };
    s->down = (struct lb_half){ .s = s, .src_fd = s->sfd, .dst_fd = s->cfd,
                                .is_splice = is_splice };
    s->up.src_end = s->client_end;
    s->last_active_ms = lb_mono_ms();
    /* conf_check_outlier: never without outlier */
    s->is_first_byte_watched = s->pool->conf->first_byte_timeout_ms > 0;
    if (s->server->conf->send_proxy != CONF_PROXY_OFF && !lb_session_hold_proxy_header(s))
        return;
    /* Adding the client reports what is pending on it already (the request
     * that came with the connection). One added to read its PROXY header
     * had its edges taken then: what followed the header is read now. */
    if ((!s->is_client_watched && lb_session_watch(s, s->cfd, 0) == -1) ||
        lb_session_arm(s, s->up.is_header_held ? LB_PROXY_HOLD_MS
                                               : lb_session_relay_wait(s, s->last_active_ms)) == -1) {
        lb_session_finish(s, "event_add failed");
        return;
    }
    if (s->is_client_watched && !lb_half_read(&s->up))
        return;
    if (events & (EPOLLIN | LB_IO_ENDING))
        lb_session_on_io(s, true, events & ~(uint32_t)EPOLLOUT);   /* the server spoke first */
}

/* Picks a server with the worker's cursor of the session's pool and takes
 * one of its slots (lb_retry_pick). A session that began before a reload
 * retries in its own (old) pool, whose cursor the worker no longer keeps: a
 * fresh one serves for that pick. The old pool's servers share their
 * rotation flags and counts with today's (struct bal_live), so such a retry
 * never picks a server taken out since. */
static int
lb_session_pick(struct lb_session *s, bool *is_again)
{
    struct bal_cursor *c, *tmp = NULL;
    uint32_t pause_ms;
    int idx;

    if (s->gen == s->w->gen) {
        c = s->w->cursors[s->pool->index];
    } else {
        c = tmp = bal_cursor_new(s->pool->bal, s->w->id);
        if (c == NULL)
            return BAL_PICK_NONE;
    }
    idx = lb_retry_pick(s->pool, c, s->client_hash, s->tried, s->ntried, s->nagain,
                        s->is_paused, is_again, &pause_ms);
    if (idx == LB_PICK_PAUSED) {
        s->is_paused = true;
        if (lb_session_arm(s, pause_ms) != 0)
            idx = BAL_PICK_NONE;
    }
    bal_cursor_free(tmp);
    return idx;
}

/* ---------------------------------------------------------------- pacing
 *
 * A worker has at most lb_pace_window() connects in flight (connect(2)
 * issued, no answer yet) to one server; the next ones wait on the server's
 * pace list, oldest first, each holding its server slot, and go as those
 * in flight are answered or fail. Without it, a burst of clients becomes a
 * burst of thousands of SYNs: a server that accepts at its own pace with a
 * backlog of 128 drops those its accept queue has no room for, the kernel
 * sends them all again 1 s later in one wave, and a wave larger than the
 * server's SYN queue turns it to SYN cookies, whose handshakes complete on
 * lb's side (counted as open, relaying) while the server, its accept queue
 * full, drops the ACK and keeps no trace of them: the client's first bytes
 * then wait for lb's retransmissions to find room, seconds later (README,
 * "Connect pacing"). */

/* The window, per worker, opens like TCP's: LB_PACE_START connects, one
 * more for each answered (slow start), with no ceiling but a sanity bound
 * (a share of LB_PACE_LIMIT, summed over the workers) until a connect
 * stalls: one with no answer after 4 times the server's smoothed connect
 * time (at least LB_PACE_STALL_MIN_MS) lost its SYN to a full accept
 * queue. The window then halves, at most once per smoothed connect time
 * (a full queue drops a whole window's SYNs at once: one loss event, as TCP
 * counts it), and the half (at least LB_PACE_START) becomes the threshold
 * past which the window grows by one per window's worth of answers
 * (congestion avoidance). The stalled session dials again when its turn
 * comes, first in line, instead of waiting for the kernel's retransmission
 * 1 s later (which would come back in one wave). Each stall of the same
 * attempt doubles its wait, as TCP backs its RTO off, so that a server
 * whose answers slowed down (a longer path) is still reached. The
 * attempt's connect_timeout runs from its start, waiting included. */
#define LB_PACE_START 4
#define LB_PACE_LIMIT 4096
#define LB_PACE_STALL_MIN_MS 10
#define LB_PACE_STALL_NEW_MS 200      /* no connect answered yet */
#define LB_PACE_BACKOFF_MAX 6         /* 64 times */

struct lb_pace {
    uint32_t in_flight;
    uint32_t window;                /* 0: LB_PACE_START */
    uint32_t ssthresh;              /* 0: no stall yet, slow start */
    uint32_t acked;                 /* answers toward the next +1 past it */
    uint32_t srtt_us;               /* smoothed connect time; 0: none yet */
    uint64_t halved_us;             /* when the window last halved */
    struct lb_session *head, *tail; /* waiting, oldest first */
    bool is_busy;                   /* on the worker's pace_busy list */
    uint32_t busy_next;             /* the next on it, as pace_busy */
};

static uint32_t
lb_pace_max(const struct lb_worker *w)
{
    size_t n = w->daemon->nworkers;
    uint32_t per = (uint32_t)(LB_PACE_LIMIT / (n ? n : 1));

    return per > LB_PACE_START ? per : LB_PACE_START;
}

static uint32_t
lb_pace_window(const struct lb_pace *p)
{
    return p->window != 0 ? p->window : LB_PACE_START;
}

/* When a connect of s in flight to p's server counts as stalled. */
static uint64_t
lb_pace_stall_ms(const struct lb_pace *p, const struct lb_session *s)
{
    uint64_t ms = p->srtt_us == 0 ? LB_PACE_STALL_NEW_MS : (4 * (uint64_t)p->srtt_us + 999) / 1000;

    return (ms > LB_PACE_STALL_MIN_MS ? ms : LB_PACE_STALL_MIN_MS) << s->nstalls;
}

/* The worker's pace state of backend id, grown on demand (ids are small
 * and stable, data.h). NULL when out of memory: the connect is not paced. */
static struct lb_pace *
lb_pace_of(struct lb_worker *w, uint32_t id)
{
    if (id >= w->npaces) {
        size_t n = w->npaces ? w->npaces : 16;

        while (n <= id)
            n *= 2;
        struct lb_pace *p = realloc(w->paces, n * sizeof(*p));

        if (p == NULL)
            return NULL;
        memset(p + w->npaces, 0, (n - w->npaces) * sizeof(*p));
        w->paces = p;
        w->npaces = n;
    }
    return &w->paces[id];
}

/* s's connect_timeout ran out before its turn came (s is off the pace
 * list): no SYN went out, so the server is not blamed. */
static void
lb_session_wait_expired(struct lb_session *s)
{
    char msg[96];

    snprintf(msg, sizeof(msg), "timeout after %llu ms waiting for its turn",
             (unsigned long long)s->pool->conf->connect_timeout_ms);
    lb_session_connect_failed(s, msg, LB_NOT_THE_SERVERS);
    lb_session_connect(s);
}

void
lb_session_on_pace(evutil_socket_t fd, short what, void *arg)
{
    struct lb_worker *w = arg;
    uint32_t busy = w->pace_busy;

    /* Only the entries that had waiters (pace_busy), not the whole table:
     * ids are never reused, so it only grows. The list is taken whole; the
     * sessions that wait meanwhile start a new one, and an entry with
     * waiters left goes back on it. */
    w->pace_busy = 0;
    while (busy != 0) {
        uint32_t id = busy - 1;

        busy = w->paces[id].busy_next;
        w->paces[id].is_busy = false;
        while (w->paces[id].head != NULL &&
               w->paces[id].in_flight < lb_pace_window(&w->paces[id])) {
            struct lb_session *s = w->paces[id].head;

            lb_pace_unlink(s);
            /* A server that left rotation while s waited (disabled,
             * deleted, down) is not dialled: the slot goes back and s
             * picks again, as after a failed dial, but the server is not
             * blamed. Either way the other servers are tried, which may
             * grow w->paces: it is looked up again each round. A turn
             * that comes after s's connect_timeout ran out (its timer
             * not run yet: a busy loop turn) is that timeout's, not a
             * dial's. */
            if (lb_mono_ms() >= s->connect_due_ms) {
                lb_session_wait_expired(s);
            } else if (!bal_server_in_rotation(s->pool->bal, s->server->index)) {
                lb_session_attempt_end(s);
                lb_session_connect(s);
            } else if (!lb_session_dial(s)) {
                lb_session_connect(s);
            }
        }
        if (w->paces[id].head != NULL && !w->paces[id].is_busy) {
            w->paces[id].is_busy = true;
            w->paces[id].busy_next = w->pace_busy;
            w->pace_busy = id + 1;
        }
    }
}

/* The session's connect is answered, failed or abandoned: its place in the
 * window goes to the next waiting one, from the worker's loop (pace_ev),
 * not from here: the caller may be walking the sessions. */
static void
lb_pace_done(struct lb_session *s)
{
    struct lb_worker *w = s->w;
    struct lb_pace *p;

    if (!s->is_pace_counted)
        return;
    s->is_pace_counted = false;
    p = &w->paces[s->server->b->id];
    p->in_flight--;
    if (p->head != NULL)
        event_active(w->pace_ev, EV_TIMEOUT, 0);    /* once, however often */
}

/* An answered connect: the window opens by one, and the connect time
 * joins the server's average (as TCP's srtt, 1/8 a sample). */
static void
lb_pace_answered(struct lb_session *s)
{
    struct lb_pace *p = s->is_pace_counted ? &s->w->paces[s->server->b->id] : NULL;
    uint64_t took = lb_mono_us() - s->attempt_us;

    if (p != NULL) {
        p->srtt_us = p->srtt_us == 0 ? (uint32_t)took
                                     : (uint32_t)((7 * (uint64_t)p->srtt_us + took) / 8);
        uint32_t win = lb_pace_window(p);

        if (p->ssthresh != 0 && win >= p->ssthresh && ++p->acked < win)
            win = 0;                    /* congestion avoidance: not yet */
        if (win != 0 && win < lb_pace_max(s->w)) {
            p->window = win + 1;
            p->acked = 0;
        }
    }
    lb_pace_done(s);
}

/* Puts the session on its server's pace list, first in line when it had
 * its turn already (stalled). */
static void
lb_pace_wait(struct lb_session *s, struct lb_pace *p, bool at_head)
{
    if (!p->is_busy) {
        p->is_busy = true;
        p->busy_next = s->w->pace_busy;
        s->w->pace_busy = s->server->b->id + 1;
    }
    s->is_pace_waiting = true;
    s->pace_prev = at_head ? NULL : p->tail;
    s->pace_next = at_head ? p->head : NULL;
    if (s->pace_prev != NULL)
        s->pace_prev->pace_next = s;
    else
        p->head = s;
    if (s->pace_next != NULL)
        s->pace_next->pace_prev = s;
    else
        p->tail = s;
}

/* Takes a waiting session off its server's pace list (its turn came, its
 * connect_timeout ran out, or it ended). */
static void
lb_pace_unlink(struct lb_session *s)
{
    struct lb_pace *p = &s->w->paces[s->server->b->id];

    if (s->pace_prev != NULL)
        s->pace_prev->pace_next = s->pace_next;
    else
        p->head = s->pace_next;
    if (s->pace_next != NULL)
        s->pace_next->pace_prev = s->pace_prev;
    else
        p->tail = s->pace_prev;
    s->pace_prev = s->pace_next = NULL;
    s->is_pace_waiting = false;
}

/* The connect in flight got no answer in lb_pace_stall_ms: its SYN was
 * most likely dropped. The window halves (once per smoothed connect time)
 * and the session dials again in its turn. */
static void
lb_pace_stalled(struct lb_session *s)
{
    struct lb_pace *p = &s->w->paces[s->server->b->id];
    uint64_t now = lb_mono_ms(), now_us = lb_mono_us();
    uint64_t every_us = p->srtt_us != 0 ? p->srtt_us : LB_PACE_STALL_NEW_MS * UINT64_C(1000);

    if (p->halved_us == 0 || now_us - p->halved_us >= every_us) {
        uint32_t half = lb_pace_window(p) / 2;

        p->window = half > 1 ? half : 1;
        p->ssthresh = half > LB_PACE_START ? half : LB_PACE_START;
        p->acked = 0;
        p->halved_us = now_us;
    }
    if (s->nstalls < LB_PACE_BACKOFF_MAX)
        s->nstalls++;
    close(s->sfd);                      /* leaves io_fd */
    s->sfd = -1;
    lb_pace_done(s);
    lb_pace_wait(s, p, true);
    event_active(s->w->pace_ev, EV_TIMEOUT, 0);
    if (lb_session_arm(s, s->connect_due_ms > now ? s->connect_due_ms - now : 0) != 0)
        lb_session_finish(s, "event_add failed");
}

/* Connects to server idx of the pool, whose slot the session holds.
 * Returns false after an immediate failure (the slot is given back: the
 * caller tries another server); true when the connect is under way, done,
 * or the session was finished (freed). */
static bool
lb_session_try(struct lb_session *s, int idx)
{
    struct lb_server *srv = &s->pool->servers[idx];

    s->is_paused = false;
    s->tried[s->ntried++] = (uint32_t)idx;
    s->server = srv;

    struct lb_pace *p = lb_pace_of(s->w, srv->b->id);

    s->connect_due_ms = lb_mono_ms() + s->pool->conf->connect_timeout_ms;
    s->nstalls = 0;
    if (p != NULL && (p->in_flight >= lb_pace_window(p) || p->head != NULL)) {
        /* Its turn comes from lb_session_on_pace; the slot stays held, so
         * the server's counts and max_connections see it. */
        lb_pace_wait(s, p, false);
        if (lb_session_arm(s, s->pool->conf->connect_timeout_ms) != 0)
            lb_session_finish(s, "event_add failed");
        return true;
    }
    return lb_session_dial(s);
}

/* The connect itself, to s->server (try above). Same returns. */
static bool
lb_session_dial(struct lb_session *s)
{
    struct lb_server *srv = s->server;
    char qbuf[128];
    int fd, err;

    fd = socket(srv->conf->addr.sa.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        /* Out of descriptors or memory here: another server will not
         * help, so give up on this client. */
        lb_log_limited(&lb_session_failed_limit, CONF_LOG_ERROR, "session_failed",
                       "frontend=%s client=%s error=%s", s->fe->conf->name, s->client_text,
                       lb_log_quote(qbuf, sizeof(qbuf), strerror(errno)));
        lb_session_finish(s, "socket failed");
        return true;
    }
    s->sfd = fd;
    s->attempt_us = lb_mono_us();
    s->is_syn_grace = false;
    lb_session_nodelay(fd);
    if (s->server->b->id < s->w->npaces) {
        s->is_pace_counted = true;
        s->w->paces[s->server->b->id].in_flight++;
    }
    if (connect(fd, &srv->conf->addr.sa.sa, srv->conf->addr.len) == 0) {
        if (lb_session_watch(s, fd, LB_IO_SERVER) == -1)
            lb_session_finish(s, "epoll_ctl failed");
        else
            lb_session_relay_start(s, 0);
        return true;
    }
    if (errno == EINPROGRESS) {
        /* The socket turns writable when the connect is done, either way;
         * the same registration then serves the relay. */
        uint64_t now = lb_mono_ms();
        uint64_t left = s->connect_due_ms > now ? s->connect_due_ms - now : 0;
        uint64_t stall = s->is_pace_counted ? lb_pace_stall_ms(&s->w->paces[srv->b->id], s) : left;

        if (lb_session_watch(s, fd, LB_IO_SERVER) == -1 ||
            lb_session_arm(s, stall < left ? stall : left) != 0)
            lb_session_finish(s, "epoll_ctl failed");
        return true;
    }
    /* An immediate failure (no route, no local port left): the other
     * servers may still be reachable. Refusals arrive later, through
     * lb_session_on_connect. */
    err = errno;
    lb_session_connect_failed(s, strerror(err), lb_connect_fault(err));
    return false;
}

/* Every server in rotation is at its max_connections: the client waits in
 * the pool's queue, or is closed when queue_max clients already do. */
static void
lb_session_queue(struct lb_session *s)
{
    const struct conf_pool *pc = s->pool->conf;

    s->wait = (struct lb_waiter){ .w = s->w, .pool = s->pool, .since_ms = lb_mono_ms(),
                                  .granted = -1 };
    if (lb_session_arm(s, pc->queue_timeout_ms) != 0) {
        lb_session_finish(s, "event_add failed");
        return;
    }
    s->state = LB_SESSION_QUEUED;
    if (!lb_queue_join(&s->wait)) {
        atomic_fetch_add_explicit(&s->fe->stats->no_server, 1, memory_order_relaxed);
        lb_log_limited(&lb_no_server_limit, CONF_LOG_ERROR, "no_server",
                       "frontend=%s pool=%s client=%s reason=\"queue full\" queue_max=%u",
                       s->fe->conf->name, pc->name, s->client_text, pc->queue_max);
        lb_session_finish(s, "queue full");
    }
}

/* Picks servers and connects until one connect is under way or done, the
 * session waits (a retry's pause, the queue), or no attempt is left. */
static void
lb_session_connect(struct lb_session *s)
{
    const struct conf_pool *pc = s->pool->conf;

    for (;;) {
        bool is_again;
        int idx;

        if (s->ntried == pc->retries + 1) {
            atomic_fetch_add_explicit(&s->fe->stats->no_server, 1, memory_order_relaxed);
            lb_log_limited(&lb_no_server_limit, CONF_LOG_ERROR, "no_server",
                           "frontend=%s pool=%s client=%s reason=\"%u connect attempts failed\"",
                           s->fe->conf->name, pc->name, s->client_text, s->ntried);
            lb_session_finish(s, "no server");
            return;
        }
        idx = lb_session_pick(s, &is_again);
        if (idx == LB_PICK_PAUSED)
            return;
        if (idx == BAL_PICK_FULL) {
            lb_session_queue(s);
            return;
        }
        if (idx < 0) {
            atomic_fetch_add_explicit(&s->fe->stats->no_server, 1, memory_order_relaxed);
            lb_log_limited(&lb_no_server_limit, CONF_LOG_ERROR, "no_server",
                           "frontend=%s pool=%s client=%s reason=%s",
                           s->fe->conf->name, pc->name, s->client_text,
                           s->ntried == 0 ? "\"no server in rotation\""
                                          : "\"no other server to try\"");
            lb_session_finish(s, "no server");
            return;
        }
        if (is_again)
            s->nagain++;
        if (s->ntried > 0)
            atomic_fetch_add_explicit(&s->fe->stats->retries, 1, memory_order_relaxed);
        if (lb_session_try(s, idx))
            return;
    }
}

void
lb_session_on_grant(struct lb_waiter *wt)
{
    struct lb_session *s = (struct lb_session *)(void *)((char *)wt -
                                                         offsetof(struct lb_session, wait));
    const struct conf_pool *pc = s->pool->conf;

    if (s->abort_reason != NULL) {
        lb_queue_release_slot(s->pool, (size_t)wt->granted);
        lb_session_finish(s, s->abort_reason);
        return;
    }
    event_del(&s->timer);
    s->state = LB_SESSION_CONNECTING;
    lb_log(CONF_LOG_DEBUG, "dequeued", "frontend=%s pool=%s client=%s waited_ms=%llu",
           s->fe->conf->name, pc->name, s->client_text,
           (unsigned long long)(lb_mono_ms() - wt->since_ms));
    if (!lb_session_try(s, wt->granted))
        lb_session_connect(s);
}

/* The connecting server socket reported events (epoll's flags). */
static void
lb_session_on_connect(struct lb_session *s, uint32_t events)
{
    int err = 0;
    socklen_t len = sizeof(err);

    /* Writable without an error is connected: no getsockopt on the way of
     * every connection. A failed connect raises EPOLLERR, and its reason
     * is in SO_ERROR. */
    if ((events & (EPOLLERR | EPOLLHUP)) &&
        getsockopt(s->sfd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
        err = errno;
    if (err == 0 && (events & (EPOLLOUT | EPOLLHUP))) {
        lb_session_relay_start(s, events);
        return;
    }
    if (err == 0)
        return;                         /* nothing decided yet */
    lb_session_connect_failed(s, strerror(err), lb_connect_fault(err));
    lb_session_connect(s);
}

/* The socket's readiness now, as epoll flags (poll's have the same values
 * on Linux). */
static uint32_t
lb_session_poll_now(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP };

    return poll(&pfd, 1, 0) == 1 ? (uint32_t)pfd.revents : 0;
}

/* The kernel re-sends an unanswered SYN 1 s after the connect, then 3 s,
 * 7 s... (its initial RTO, doubling), and its timer wheel may send it tens
 * of ms late. A server whose accept queue overflowed drops SYNs, and its
 * queue has usually drained by the retransmission: a connect_timeout that
 * expires just before (1 s is a common setting) cuts every such connect at
 * the moment it would succeed, and the retry's fresh SYN starts the wait
 * over. So when the deadline falls within LB_SYN_GRACE_MS before the next
 * retransmission, or after one that is due but not yet sent, the attempt
 * waits for it and LB_SYN_GRACE_MS more, once. Measured on a burst of 5,000
 * clients to two servers with a backlog of 128: 3,000 connects cut at 1 s
 * without this, 300 with it. */
#define LB_SYN_GRACE_MS 100

static bool
lb_session_syn_grace(struct lb_session *s)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    int64_t elapsed, next_ms, wait_ms;
    uint64_t rto0_ms;

    if (s->is_syn_grace ||
        getsockopt(s->sfd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1 ||
        ti.tcpi_state != TCP_SYN_SENT || ti.tcpi_retransmits > 16)
        return false;
    /* tcpi_rto is the initial RTO doubled once per retransmission. */
    rto0_ms = (uint64_t)(ti.tcpi_rto >> ti.tcpi_retransmits) / 1000;
    next_ms = (int64_t)(rto0_ms * ((UINT64_C(2) << ti.tcpi_retransmits) - 1));
    elapsed = (int64_t)((lb_mono_us() - s->attempt_us) / 1000);
    wait_ms = next_ms - elapsed;
    if (rto0_ms == 0 || wait_ms > LB_SYN_GRACE_MS)
        return false;
    s->is_syn_grace = true;
    return lb_session_arm(s, (uint64_t)(wait_ms > 0 ? wait_ms : 0) + LB_SYN_GRACE_MS) == 0;
}

/* A live error of the session's server (outlier detection), counted once
 * a session. */
static void
lb_session_blame(struct lb_session *s, enum bal_outlier_kind kind)
{
    if (s->is_blamed)
        return;
    s->is_blamed = true;
    lb_worker_live_error(s->w, s->server, kind, s->started_ms);
}

/* How long a relaying session's timer waits from now: the rest of its
 * idle period, or less once the client's first byte went to a server that
 * first_byte_timeout watches (lb_half_count re-arms it then: a session
 * whose client says nothing costs no wakeup more than idle_timeout's). */
static uint64_t
lb_session_relay_wait(const struct lb_session *s, uint64_t now)
{
    uint64_t idle = s->pool->conf->idle_timeout_ms, fbt = s->pool->conf->first_byte_timeout_ms;
    uint64_t quiet = now > s->last_active_ms ? now - s->last_active_ms : 0;
    uint64_t wait = quiet < idle ? idle - quiet : 0, fb;

    if (!s->is_first_byte_watched || s->first_sent_ms == 0)
        return wait;
    fb = s->first_sent_ms + fbt > now ? s->first_sent_ms + fbt - now : 0;
    return fb < wait ? fb : wait;
}

static void
lb_session_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct lb_session *s = arg;
    uint64_t now = lb_mono_ms(), idle, quiet;
    char msg[64];

    if (now < s->due_ms && lb_session_arm(s, s->due_ms - now) == 0)
        return;                         /* fired early: see lb_session_arm */
    if (s->state == LB_SESSION_HEADER) {
        lb_session_header_bad(s, LB_PROXY_TIMEOUT);
        return;
    }
    if (s->state == LB_SESSION_HELLO) {
        lb_session_unroutable(s, LB_SNI_TIMEOUT, false);
        return;
    }
    if (s->state == LB_SESSION_QUEUED) {
        /* A grant that won the race is on its way: it connects. */
        if (!lb_queue_leave(&s->wait, true))
            return;
        lb_log_limited(&lb_queue_timeout_limit, CONF_LOG_ERROR, "queue_timeout",
                       "frontend=%s pool=%s client=%s waited_ms=%llu",
                       s->fe->conf->name, s->pool->conf->name, s->client_text,
                       (unsigned long long)(lb_mono_ms() - s->wait.since_ms));
        lb_session_finish(s, "queue timeout");
        return;
    }
    if (s->state == LB_SESSION_CONNECTING && s->is_pace_waiting) {
        lb_pace_unlink(s);
        lb_session_wait_expired(s);
        return;
    }
    if (s->state == LB_SESSION_CONNECTING && s->sfd < 0) {
        lb_session_connect(s);          /* the pause before a retry is over */
        return;
    }
    if (s->state == LB_SESSION_CONNECTING) {
        /* The kernel retransmits an unanswered SYN after 1 s, the moment a
         * 1 s connect_timeout expires: when the answer came in the same
         * loop turn as the timer, the connect succeeded. */
        uint32_t ready = lb_session_poll_now(s->sfd);

        if (ready & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
            lb_session_on_connect(s, ready);
            return;
        }
        if (now < s->connect_due_ms && s->is_pace_counted && !s->is_syn_grace) {
            lb_pace_stalled(s);
            return;
        }
        if (lb_session_syn_grace(s))
            return;
        snprintf(msg, sizeof(msg), "timeout after %llu ms",
                 (unsigned long long)s->pool->conf->connect_timeout_ms);
        lb_session_connect_failed(s, msg, BAL_OUTLIER_CONNECT_TIMEOUT);
        lb_session_connect(s);
        return;
    }
    /* The client sent nothing within LB_PROXY_HOLD_MS: the header goes
     * alone (a server that speaks first waits for it). */
    if (s->up.is_header_held && !lb_half_send_held(&s->up))
        return;
    /* first_byte_timeout: the client's bytes went to the server and
     * nothing came back for that long. A live error of the server, once a
     * session; the session goes on (idle_timeout still ends it). */
    if (s->is_first_byte_watched && s->first_sent_ms != 0 &&
        now - s->first_sent_ms >= s->pool->conf->first_byte_timeout_ms) {
        s->is_first_byte_watched = false;
        lb_session_blame(s, BAL_OUTLIER_NO_FIRST_BYTE);
    }
    /* Idle: reads only stamp last_active_ms; the timer re-arms itself for
     * the rest of the period instead of being re-added on every read. */
    idle = s->pool->conf->idle_timeout_ms;
    quiet = now > s->last_active_ms ? now - s->last_active_ms : 0;
    if (quiet >= idle) {
        lb_session_finish(s, "idle timeout");
        return;
    }
    if (lb_session_arm(s, lb_session_relay_wait(s, now)) == -1)
        lb_session_finish(s, "event_add failed");
}

/* -------------------------------------------------------------- relaying */

static void
lb_half_count(struct lb_half *h, size_t n)
{
    struct lb_session *s = h->s;
    struct lb_server *srv = s->server;

    if (s->is_first_byte_watched) {
        if (!h->is_upstream) {
            s->is_first_byte_watched = false;       /* the server answered */
        } else if (h->bytes == 0) {
            uint64_t fbt = s->pool->conf->first_byte_timeout_ms;

            s->first_sent_ms = lb_mono_ms();
            /* the timer waits for idle_timeout: bring it nearer. Should
             * event_add fail, the idle timer still ends the session. */
            if (s->due_ms > s->first_sent_ms + fbt)
                (void)lb_session_arm(s, fbt);
        }
    }
    h->bytes += n;
    if (h->is_upstream)
        atomic_fetch_add_explicit(&srv->b->bytes_out, n, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&srv->b->bytes_in, n, memory_order_relaxed);
}

static void
lb_half_release(struct lb_half *h)
{
    if (h->buf != NULL) {
        lb_worker_buf_put(h->s->w, h->buf);
        h->buf = NULL;
    }
    if (h->pipe != NULL) {
        lb_worker_pipe_put(h->s->w, h->pipe, h->len == 0);
        h->pipe = NULL;
    }
    h->off = h->len = 0;
}

/* src reached EOF and everything read is written: pass the FIN on. False
 * when that ended the session. */
static bool
lb_half_shut(struct lb_half *h)
{
    struct lb_session *s = h->s;
    struct lb_half *other = h->is_upstream ? &s->down : &s->up;

    lb_half_release(h);
    h->is_shut = true;
    if (other->is_shut) {
        /* Both ways done: close(2) sends the FIN, a shutdown first would
         * only cost a syscall per connection. */
        lb_session_finish(s, "closed");
        return false;
    }
    (void)shutdown(h->dst_fd, SHUT_WR);
    return true;
}

/* A read from h's source (on_src) or a write to its destination failed
 * with errno: the session ends. The server's reset before its first byte
 * (a write to it may see it first, as EPIPE) is a live error of the server
 * (outlier detection): it accepted, then failed the request. */
static void
lb_half_fail(struct lb_half *h, bool on_src)
{
    struct lb_session *s = h->s;
    bool is_client = h->is_upstream == on_src;

    if (!is_client && s->down.bytes == 0 && (errno == ECONNRESET || errno == EPIPE))
        lb_session_blame(s, BAL_OUTLIER_RESET);
    lb_session_finish(s, is_client ? "client error" : "server error");
}

/* Reads and writes on until the source runs dry, the destination is full
 * or the budget is spent: a bulk stream then costs one wake-up per
 * LB_RELAY_BUDGET buffers instead of one per buffer, and the budget keeps
 * one busy connection from starving the worker's others. */
#define LB_RELAY_BUDGET 8

/* What a read of n bytes (recv or splice) from h's source means: true when
 * there are bytes to pass on (counted); false when the turn is over
 * (drained, EOF passed on, an error), *is_alive saying whether the session
 * still exists. */
static bool
lb_half_got(struct lb_half *h, ssize_t n, int round, bool *is_alive)
{
    struct lb_session *s = h->s;

    *is_alive = true;
    if (n == 0) {
        *is_alive = lb_half_shut(h);
        return false;
    }
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            lb_half_release(h);
            return false;
        }
        lb_half_fail(h, true);
        *is_alive = false;
        return false;
    }
    if (round == 0)
        s->last_active_ms = lb_mono_ms();
    lb_half_count(h, (size_t)n);
    return true;
}

static bool lb_half_splice(struct lb_half *h);

/* Sends the PROXY header held in h's buffer, with the client bytes read
 * after it if any; what the socket does not take is written on when it has
 * room (lb_half_flush). False when that ended the session. */
static bool
lb_half_send_held(struct lb_half *h)
{
    ssize_t w;

    h->is_header_held = false;
    w = send(h->dst_fd, h->buf->data, h->len, MSG_NOSIGNAL);
    if (w < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            lb_half_fail(h, false);
            return false;
        }
        w = 0;
    }
    if ((uint32_t)w == h->len) {
        lb_half_release(h);
    } else {
        h->off = (uint32_t)w;
        h->len -= (uint32_t)w;
    }
    return true;
}

/* The client may have sent its first bytes: they join the held header, in
 * one send. Nothing yet keeps the hold (the timer ends it). False when the
 * session ended. */
static bool
lb_half_read_held(struct lb_half *h)
{
    struct lb_session *s = h->s;
    size_t room = LB_BUF_SIZE - h->len;
    ssize_t n = recv(h->src_fd, h->buf->data + h->len, room, 0);

    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return true;
    if (n < 0) {
        lb_half_fail(h, true);
        return false;
    }
    if (n > 0) {
        s->last_active_ms = lb_mono_ms();
        lb_half_count(h, (size_t)n);
        h->len += (uint32_t)n;
    }
    if (!lb_half_send_held(h))
        return false;
    /* The hold is over: the timer goes back to the idle timeout now, not
     * by firing (a wakeup of the loop for nothing, on most sessions). */
    if (lb_session_arm(s, lb_session_relay_wait(s, lb_mono_ms())) == -1) {
        lb_session_finish(s, "event_add failed");
        return false;
    }
    /* The client's FIN (read again, and passed on, by the plain path) or
     * more bytes than the buffer had room for. */
    if (n == 0 || (size_t)n == room || h->src_end != LB_PEER_OPEN)
        return lb_half_read(h);
    return true;
}

/* The source of h may have data. False when the session ended. */
static bool
lb_half_read(struct lb_half *h)
{
    struct lb_session *s = h->s;
    ssize_t n, w;
    bool is_alive, is_last;

    if (h->is_header_held)
        return lb_half_read_held(h);
    /* Blocked on the destination (lb_half_flush reads on), or done. */
    if (h->len > 0 || h->is_shut)
        return true;
    if (h->is_splice)
        return lb_half_splice(h);
    if (h->buf == NULL && (h->buf = lb_worker_buf_get(s->w)) == NULL) {
        lb_session_finish(s, "out of memory");
        return false;
    }
    for (int round = 0;; round++) {
        n = recv(h->src_fd, h->buf->data, LB_BUF_SIZE, 0);
        if (!lb_half_got(h, n, round, &is_alive))
            return is_alive;

        /* Write at once: in the common case everything goes and the buffer
         * is back on the free list before the next event. When these bytes
         * are the last (the FIN was reported, and this read took everything
         * before it: lb_peer_end), the kernel holds them for the FIN that
         * lb_half_shut sends right after (MSG_MORE): bytes and FIN leave in
         * one segment, and the peer wakes once for both, as with HAProxy. */
        is_last = h->src_end == LB_PEER_FIN && n < LB_BUF_SIZE;
        w = send(h->dst_fd, h->buf->data, (size_t)n, MSG_NOSIGNAL | (is_last ? MSG_MORE : 0));
        if (w == n && n == LB_BUF_SIZE && s->pool->conf->splice == CONF_SPLICE_AUTO) {
            /* A full buffer in one read: a bulk direction, spliced from
             * now on (HAProxy's splice-auto decides the same way). */
            lb_half_release(h);
            h->is_splice = true;
            return lb_half_splice(h);
        }
        if (w == n) {
            if (is_last)
                return lb_half_shut(h);
            if (n < LB_BUF_SIZE && h->src_end == LB_PEER_OPEN) {
                lb_half_release(h);     /* drained: the next data is an edge */
                return true;
            }
            if (round + 1 == LB_RELAY_BUDGET) {
                lb_half_release(h);
                lb_session_read_again(s, h->is_upstream ? LB_AGAIN_UP : LB_AGAIN_DOWN);
                return true;
            }
            continue;
        }
        if (w < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                lb_half_fail(h, false);
                return false;
            }
            w = 0;
        }
        /* The destination reports an edge once it has room again. */
        h->off = (uint32_t)w;
        h->len = (uint32_t)(n - w);
        return true;
    }
}

/* splice(2) asks for this much a call; the pipe's room (64 KiB by default)
 * caps what moves. */
#define LB_SPLICE_MAX (1 << 20)

/* Moves pending bytes from h's pipe to its destination: -1 on an error
 * (the session ended), else what is still pending. */
static ssize_t
lb_half_splice_out(struct lb_half *h)
{
    ssize_t w = splice(h->pipe->rd, NULL, h->dst_fd, NULL, h->len,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

    if (w < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return h->len;
        lb_half_fail(h, false);
        return -1;
    }
    h->len -= (uint32_t)w;
    return h->len;
}

/* lb_half_read for a spliced half: socket -> pipe -> socket, the bytes
 * never copied to user space. A pipe's room limits each move, so a short
 * move does not mean the socket is empty: it reads on until EAGAIN. */
static bool
lb_half_splice(struct lb_half *h)
{
    struct lb_session *s = h->s;
    ssize_t n, left;
    bool is_alive;

    if (h->pipe == NULL && (h->pipe = lb_worker_pipe_get(s->w)) == NULL) {
        h->is_splice = false;           /* no descriptor left: copy */
        return lb_half_read(h);
    }
    for (int round = 0;; round++) {
        n = splice(h->src_fd, NULL, h->pipe->wr, NULL, LB_SPLICE_MAX,
                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (!lb_half_got(h, n, round, &is_alive))
            return is_alive;
        h->len = (uint32_t)n;
        if ((left = lb_half_splice_out(h)) != 0)
            return left > 0;            /* blocked: the destination's edge */
        if (round + 1 == LB_RELAY_BUDGET) {
            lb_half_release(h);
            lb_session_read_again(s, h->is_upstream ? LB_AGAIN_UP : LB_AGAIN_DOWN);
            return true;
        }
    }
}

/* The destination of h is writable. False when the session ended. */
static bool
lb_half_flush(struct lb_half *h)
{
    struct lb_session *s = h->s;
    ssize_t w;

    /* A held header waits for the client or the timer, not for room. */
    if (h->len == 0 || h->is_header_held)
        return true;
    if (h->pipe != NULL) {
        if ((w = lb_half_splice_out(h)) != 0)
            return w > 0;
        s->last_active_ms = lb_mono_ms();
        /* The pipe is empty and stays: the read that finds the socket dry
         * gives it back (past the pool's room, that closes it). */
        return lb_half_read(h);
    }
    w = send(h->dst_fd, h->buf->data + h->off, h->len, MSG_NOSIGNAL);
    if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return true;
        lb_half_fail(h, false);
        return false;
    }
    s->last_active_ms = lb_mono_ms();
    h->off += (uint32_t)w;
    h->len -= (uint32_t)w;
    if (h->len > 0)
        return true;
    /* The source's edges were passed over while the half was blocked. */
    lb_half_release(h);
    return lb_half_read(h);
}

/* One epoll event for one of the session's sockets. */
static void
lb_session_on_io(struct lb_session *s, bool is_server, uint32_t events)
{
    struct lb_half *from = is_server ? &s->down : &s->up;  /* reads this socket */
    struct lb_half *to = is_server ? &s->up : &s->down;    /* writes it */

    if (is_server && s->state == LB_SESSION_CONNECTING) {
        lb_session_on_connect(s, events);
        return;
    }
    if (!is_server && s->state == LB_SESSION_HEADER) {
        lb_session_read_header(s, events);
        return;
    }
    if (!is_server && s->state == LB_SESSION_HELLO) {
        lb_session_read_hello(s, events);
        return;
    }
    if (!is_server && s->state != LB_SESSION_RELAYING) {
        /* After its header, before a server: the relay reads what came. */
        s->client_end = lb_peer_end(s->client_end, events);
        return;
    }
    from->src_end = lb_peer_end(from->src_end, events);
    if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && !lb_half_flush(to))
        return;
    if (events & (EPOLLIN | LB_IO_ENDING))
        (void)lb_half_read(from);
}

/* A half spent its budget with data left: read it on in the loop's next
 * turn (an edge-triggered socket will not say again). A timer of 0, not
 * event_active: libevent runs what is activated meanwhile in the same turn,
 * so a stream that always has more would keep the loop from its listeners,
 * mailbox and timers. */
static void
lb_session_again_arm(struct lb_worker *w)
{
    if (w->again == NULL && !w->is_io_more)
        (void)event_add(w->again_ev, &(struct timeval){ 0, 0 });
}

static void
lb_session_read_again(struct lb_session *s, uint8_t half)
{
    struct lb_worker *w = s->w;

    if (s->again == 0) {
        lb_session_again_arm(w);
        s->again_next = w->again;
        w->again = s;
    }
    s->again |= half;
}

static void
lb_session_again_unlink(struct lb_session *s)
{
    for (struct lb_session **p = &s->w->again; *p != NULL; p = &(*p)->again_next) {
        if (*p == s) {
            *p = s->again_next;
            break;
        }
    }
    s->again = 0;
}

/* Sessions that end while a batch runs are freed after it: a later entry
 * of the batch may name them (is_done makes it skip). */
static void
lb_session_batch_end(struct lb_worker *w)
{
    struct lb_session *s;

    w->is_dispatching = false;
    while ((s = w->dead) != NULL) {
        w->dead = s->next;
        free(s);
    }
}

/* One batch of the sessions' and UDP flows' events. libevent watches
 * io_fd edge-triggered (a level-triggered nested epoll set is polled again
 * on every turn of the loop), so a full batch leaves the rest to the next
 * turn. */
static void
lb_session_io_batch(struct lb_worker *w)
{
    struct epoll_event evs[LB_IO_BATCH];
    int n = epoll_wait(w->io_fd, evs, LB_IO_BATCH, 0);

    for (int i = 0; i < n; i++) {
        uintptr_t p = (uintptr_t)evs[i].data.ptr;
        struct lb_session *s;

        if (p & LB_IO_FLOW) {
            lb_udp_on_flow_io((struct lb_flow *)(p & ~LB_IO_FLOW));
            continue;
        }
        s = (struct lb_session *)(p & ~LB_IO_SERVER);
        if (!s->is_done)
            lb_session_on_io(s, (p & LB_IO_SERVER) != 0, evs[i].events);
    }
    if (n == LB_IO_BATCH) {
        lb_session_again_arm(w);
        w->is_io_more = true;
    }
}

void
lb_session_dispatch(evutil_socket_t fd, short what, void *arg)
{
    struct lb_worker *w = arg;

    w->is_dispatching = true;
    lb_session_io_batch(w);
    lb_session_batch_end(w);
}

void
lb_session_on_again(evutil_socket_t fd, short what, void *arg)
{
    struct lb_worker *w = arg;
    struct lb_session *s = w->again, *next;
    bool is_io_more = w->is_io_more;

    w->is_dispatching = true;
    /* What asks again from here on waits for the next turn. */
    w->again = NULL;
    w->is_io_more = false;
    for (; s != NULL; s = next) {
        uint8_t half = s->again;

        next = s->again_next;
        s->again = 0;
        if (s->is_done)
            continue;
        if ((half & LB_AGAIN_UP) && !lb_half_read(&s->up))
            continue;
        if (half & LB_AGAIN_DOWN)
            (void)lb_half_read(&s->down);
    }
    if (is_io_more)
        lb_session_io_batch(w);
    lb_session_batch_end(w);
}

/* ---------------------------------------------------------------- ending */

void
lb_session_abort(struct lb_session *s, const char *reason)
{
    if (s->state == LB_SESSION_QUEUED && !lb_queue_leave(&s->wait, false)) {
        s->abort_reason = reason;       /* lb_session_on_grant closes it */
        return;
    }
    lb_session_finish(s, reason);
}

struct lb_session *
lb_session_next(const struct lb_session *s)
{
    return s->next;
}

uint64_t
lb_session_drain_deadline(const struct lb_session *s)
{
    return s->server != NULL ? atomic_load(&s->server->b->drain_deadline_ms) : 0;
}

void
lb_session_drain_close(struct lb_session *s)
{
    atomic_fetch_add_explicit(&s->server->b->drained_by_timeout, 1, memory_order_relaxed);
    lb_session_finish(s, "drained");
}

/* The single exit: every path that ends a session comes here, once. */
static void
lb_session_finish(struct lb_session *s, const char *reason)
{
    struct lb_worker *w = s->w;
    char qbuf[64];

    lb_log(CONF_LOG_DEBUG, "session_end",
           "id=%016llx frontend=%s server=%s client=%s sni=%s state=%s reason=%s "
           "bytes_in=%llu bytes_out=%llu duration_ms=%llu", (unsigned long long)s->id,
           s->fe->conf->name, s->server ? s->server->conf->name : "-",
           s->client_text, s->sni != NULL ? s->sni : "-", lb_session_state_names[s->state],
           lb_log_quote(qbuf, sizeof(qbuf), reason),
           (unsigned long long)s->down.bytes, (unsigned long long)s->up.bytes,
           (unsigned long long)(lb_mono_ms() - s->started_ms));

    s->is_done = true;
    event_del(&s->timer);
    if (s->pool != NULL)
        lb_ahist_observe(&s->pool->shared->session_duration,
                         (lb_mono_ms() - s->started_ms) * 1000);
    if (s->again != 0)
        lb_session_again_unlink(s);
    if (s->is_pace_waiting)
        lb_pace_unlink(s);
    lb_pace_done(s);
    /* The server's socket closes before its slot is given back, so that a
     * server with max_connections never has one more open, even for the
     * moment a grant takes. The counts drop before the client's socket
     * closes: a client (or a test) that sees the close finds them lowered. */
    if (s->sfd >= 0)
        close(s->sfd);
    if (s->server != NULL)
        lb_queue_release_slot(s->pool, s->server->index);
    atomic_fetch_sub_explicit(&s->fe->stats->active_connections, 1, memory_order_relaxed);
    if (s->sources != NULL)
        lb_sources_leave(s->sources, &s->source);
    lb_half_release(&s->up);
    lb_half_release(&s->down);
    close(s->cfd);
    free(s->sni);

    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        w->sessions = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    w->nsessions--;

    lb_gen_unref(s->gen);
    if (w->is_dispatching) {
        s->next = w->dead;              /* a later event may name it */
        w->dead = s;
    } else {
        free(s);
    }
    lb_limit_release(w->daemon);    /* after the closes: it guards descriptors */
    lb_worker_session_gone(w);
}
