/*
 * data.h - the data path: worker threads, their sessions and relay buffers,
 * and the connection cap they share.
 *
 * A worker owns one event_base, its listening sockets (one per frontend
 * address, SO_REUSEPORT), its sessions and its balancer cursors; no other
 * thread touches them. Other threads ask things of a worker only through
 * its mailbox (lb_worker_post).
 */
#ifndef LB_DATA_H
#define LB_DATA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bal_outlier.h"            /* enum bal_outlier_kind */
#include "conf.h"
#include "core.h"                   /* enum lb_sni_bad */

struct lb_daemon;
struct lb_frontend;
struct lb_gen;
struct lb_listener;
struct lb_mailbox;
struct lb_pool;
struct lb_queue;
struct lb_session;
struct lb_server;
struct lb_buf;

/* What other threads ask of a worker, in the order asked. */
enum lb_worker_msg_kind {
    LB_WORKER_SWITCH = 0,               /* move to gen (main: reload) */
    LB_WORKER_STOP,                     /* close listeners, finish sessions */
    LB_WORKER_STOP_HANDED_OVER,         /* the same after a hand-over: the
                                           new process has the sockets */
    LB_WORKER_FORCE,                    /* close every session now */
    LB_WORKER_DRAIN,                    /* a server started draining: scan */
    LB_WORKER_WAKE,                     /* the connection cap paused or
                                           resumed: look at the flag */
    LB_WORKER_GRANT,                    /* a queued session got a slot */
};

struct lb_worker_msg {
    enum lb_worker_msg_kind kind;
    struct lb_gen *gen;                 /* SWITCH: a reference for the worker */
    struct lb_waiter *waiter;           /* GRANT: the worker's own session */
};

/* What an io_fd member's epoll data points to, told by its low bits (the
 * objects are malloc'ed, so aligned): with neither bit, a session, for its
 * client socket (session.c); with LB_IO_SERVER, a session, for its server
 * socket; with LB_IO_FLOW, a UDP flow (udp.c). */
#define LB_IO_SERVER ((uintptr_t)1)
#define LB_IO_FLOW ((uintptr_t)2)

struct lb_worker {
    /* set before the thread starts, then read-only */
    unsigned id;
    struct lb_daemon *daemon;
    struct lb_mailbox *mailbox;         /* struct lb_worker_msg */

    /* owned by the worker's thread */
    struct lb_gen *gen;                 /* one reference */
    pthread_t thread;
    struct event_base *base;
    struct event *retry_accept_ev;      /* re-enables accepts after EMFILE */
    struct event *drain_ev;             /* next drain deadline */
    struct event *switch_retry_ev;      /* a switch that ran out of memory */
    struct lb_gen *switch_pending;      /* ... and its generation */
    struct lb_listener *listeners;      /* one per frontend of gen */
    size_t nlisteners;
    struct lb_listener *retiring;       /* closing: accepting what is
                                           queued (worker.c) */
    struct event *retire_ev;            /* the next retiring grace ends */
    struct bal_cursor **cursors;        /* one per pool of gen */
    struct lb_session *sessions;        /* doubly linked, for shutdown */
    size_t nsessions;
    struct lb_buf *free_bufs;           /* relay buffers kept for reuse */
    struct lb_buf *udp_buf;             /* datagrams, for every UDP address
                                           (udp.c); NULL until one is used */
    size_t nfree_bufs;
    struct lb_pipe *free_pipes;         /* empty splice pipes kept */
    size_t nfree_pipes;
    int io_fd;                          /* epoll set of the sessions' and the
                                           UDP flows' sockets (LB_IO_) */
    struct event *io_ev;                /* io_fd readable: lb_session_dispatch */
    struct event *again_ev;             /* lb_session_on_again, next turn */
    struct lb_session *again;           /* sessions with reads left (budget) */
    bool is_io_more;                    /* io_fd had more than one batch */
    struct lb_session *dead;            /* ended during the dispatch */
    struct lb_pace *paces;              /* connect pacing, by backend id */
    size_t npaces;
    uint32_t pace_busy;                 /* 1 + id of the first pace entry
                                           with waiters; 0: none */
    struct event *pace_ev;              /* a paced connect may go */
    bool is_dispatching;
    bool is_stopping;
    bool is_handed_over;                /* stopping after a hand-over */
    bool is_forced;                     /* past shutdown_timeout */
    bool is_accept_paused_emfile;
    uint64_t turn_since_us;             /* this turn on the CPU began, when
                                           workers outnumber the CPUs */
    uint64_t session_seq;               /* sessions started: their ids */
};

/* ------------------------------------------------------------- worker.c */

/* Creates worker w's event base, its mailbox and its accept events on its
 * socket of every frontend of the current generation. Main thread, before
 * lb_worker_start. -1 with err set. */
int lb_worker_init(struct lb_worker *w, struct lb_daemon *d, unsigned id,
                   char *err, size_t errlen);
int lb_worker_start(struct lb_worker *w);
void lb_worker_fini(struct lb_worker *w);     /* after the thread joined */

/* Asks a worker (every worker) for something; for SWITCH, gen carries a
 * reference the worker takes over. Any thread. -1 when out of memory (a
 * SWITCH's reference then stays the caller's). */
int lb_worker_post(struct lb_worker *w, enum lb_worker_msg_kind kind, struct lb_gen *gen);
int lb_worker_post_grant(struct lb_worker *w, struct lb_waiter *wt);
void lb_workers_post(struct lb_daemon *d, enum lb_worker_msg_kind kind);

/* Releases one slot of the connection cap; resumes accepting in every worker
 * when this ends a pause. Called by the worker that owned the session. */
void lb_limit_release(struct lb_daemon *d);

/* Relay buffers of the worker: allocated only while data is in flight. */
struct lb_buf *lb_worker_buf_get(struct lb_worker *w);
void lb_worker_buf_put(struct lb_worker *w, struct lb_buf *b);

/* Pipes for splice(2), allocated only while data is in flight: NULL when
 * none can be made (descriptors or memory), and the half copies instead. A
 * pipe that still holds bytes is closed, not kept. */
struct lb_pipe {
    struct lb_pipe *next;               /* free list link */
    int rd, wr;
};
struct lb_pipe *lb_worker_pipe_get(struct lb_worker *w);
void lb_worker_pipe_put(struct lb_worker *w, struct lb_pipe *p, bool is_empty);

/* Called by a session after it ended and unlinked itself (the worker ends
 * its loop during shutdown when it was the last one). */
void lb_worker_session_gone(struct lb_worker *w);

/* Client traffic met an error of kind k at srv (connect refused or timed
 * out, a reset or silence before the server's first byte) on a connection
 * begun at began_ms: counted, and told to main, which decides on
 * ejections (state/outlier.c), when srv's pool has outlier on. */
void lb_worker_live_error(struct lb_worker *w, struct lb_server *srv, enum bal_outlier_kind k,
                          uint64_t began_ms);

/* -------------------------------------------------------------- queue.c
 * A pool's queue (struct lb_queue, state_types.h): clients that found every
 * server in rotation at its max_connections wait here, oldest first, across
 * workers, until a slot frees or queue_timeout passes (HAProxy's maxqueue
 * and timeout queue). A slot is handed over by taking it for the oldest
 * waiter and posting LB_WORKER_GRANT to the waiter's worker, which then
 * connects. */

/* A session's place in the queue, embedded in the session. Set by its
 * worker before it joins; the links, is_queued and granted are under the
 * queue's lock from then on. */
struct lb_waiter {
    struct lb_waiter *prev, *next;
    struct lb_worker *w;
    struct lb_pool *pool;               /* of the session's generation */
    uint64_t since_ms;
    int granted;                        /* server index in pool, or -1 */
    bool is_queued;
};

/* Joins the queue of wt->pool: false when queue_max clients already wait.
 * The waiter may be granted at once (a slot freed since its pick). */
bool lb_queue_join(struct lb_waiter *wt);
/* Leaves without a slot (queue timeout, shutdown): true when it was still
 * waiting; false when a slot was granted and its GRANT is on the way (the
 * session must wait for it and give the slot back). */
bool lb_queue_leave(struct lb_waiter *wt, bool is_timeout);
/* Gives back a connection slot of server i of pool p, which goes to the
 * oldest waiter when anyone waits. Any worker. */
void lb_queue_release_slot(struct lb_pool *p, size_t i);
/* Hands every slot free now to the oldest waiters (a server came back into
 * rotation). Any thread. */
void lb_queue_kick(struct lb_queue *q);

/* ------------------------------------------------------------- retry.c */

/* Picks the server for attempt ntried + 1 of a connecting session, whose
 * ntried attempts so far went to tried[], nagain of them to a server it had
 * tried before, and takes one of its slots (bal_pick_attempt: the servers
 * in rotation it has not tried first, then again the one tried longest
 * ago). Before such a repeat the session waits: LB_PICK_PAUSED, no slot
 * held, *pause_ms = bal_retry_pause_ms(c, nagain + 1); once it waited it
 * asks again with is_paused, and connects. BAL_PICK_NONE and BAL_PICK_FULL
 * as bal_pick_attempt. Worker thread (c is the worker's). */
#define LB_PICK_PAUSED (-100)
int lb_retry_pick(struct lb_pool *p, struct bal_cursor *c, uint64_t client_hash,
                  const uint32_t *tried, uint32_t ntried, uint32_t nagain, bool is_paused,
                  bool *is_again, uint32_t *pause_ms);

/* ------------------------------------------------------------ access.c
 * Who may connect to a frontend: its allow and deny lists, and the
 * per-source limits (max_connections_per_source, rate_per_source) kept in
 * a bounded table of source addresses that the frontend's workers share.
 * The table lives as long as the frontend's name (it hangs off struct
 * lb_fe_stats), so a reload keeps its counts while the new limits apply to
 * the next connection at once. */

enum lb_deny_reason {
    LB_DENY_NONE = 0,
    LB_DENY_ACL,                    /* deny matched, or allow did not */
    LB_DENY_PER_SOURCE,             /* max_connections_per_source open */
    LB_DENY_RATE,                   /* rate_per_source in the last second */
    LB_DENY_REASONS
};
const char *lb_deny_reason_name(enum lb_deny_reason r);  /* "acl", ... */

/* Whether sa (AF_INET or AF_INET6; an IPv4-mapped IPv6 address counts as
 * its IPv4 address) is inside one of l's blocks. */
bool lb_cidrs_match(const struct conf_cidrs *l, const struct sockaddr *sa);

/* The frontend's allow and deny lists, for sa: LB_DENY_NONE or _ACL. */
enum lb_deny_reason lb_access_acl(const struct conf_frontend *fc, const struct sockaddr *sa);

struct lb_sources;

/* A connection's place in the table, to give back when it closes. */
struct lb_source_ref {
    uint32_t slot;                  /* LB_SOURCE_UNTRACKED: not counted */
};
#define LB_SOURCE_UNTRACKED UINT32_MAX

/* A table of at most size sources, NULL when out of memory. Its memory
 * grows with the sources seen, up to size entries (README, "Client
 * addresses and access control"), and stays there. */
struct lb_sources *lb_sources_new(uint32_t size);
void lb_sources_free(struct lb_sources *t);
/* A reload's new source_table_size: the least recently seen sources with
 * no connection open go when it shrinks. */
void lb_sources_resize(struct lb_sources *t, uint32_t size);

/* A new connection from sa under fc's limits, at now_ms: LB_DENY_NONE and
 * *ref (the caller gives it back with lb_sources_leave), or the limit it
 * hit (nothing to give back). Sources are IPv4 addresses and IPv6 prefixes
 * of fc->source_ipv6_prefix bits. When every entry holds open
 * connections, a new source is let in untracked (its ref says so) rather
 * than refused: the table bounds memory, never who may connect. Any
 * worker. */
enum lb_deny_reason lb_sources_enter(struct lb_sources *t, const struct conf_frontend *fc,
                                     const struct sockaddr *sa, uint64_t now_ms,
                                     struct lb_source_ref *ref);
/* Gives back a connection's ref when it closes, and clears it (a second
 * leave, or one of an untracked ref, does nothing). O(1): no lookup. Any
 * worker. */
void lb_sources_leave(struct lb_sources *t, struct lb_source_ref *ref);

/* For /stats and /metrics. */
struct lb_sources_stats {
    uint64_t entries, size, bytes;  /* in use, capacity, memory held */
    uint64_t evictions, untracked;
};
void lb_sources_stats(struct lb_sources *t, struct lb_sources_stats *out);

/* For the unit tests: 0 when the table's counts, hash chains, LRU list
 * (exactly the entries with no connection open) and free list agree; -1
 * and what disagrees in err. O(size), under the table's lock. */
int lb_sources_check(struct lb_sources *t, char *err, size_t errlen);

/* ------------------------------------------------------------- route.c
 * A frontend with route lines (TLS passthrough routed by name) picks each
 * client's pool from the server name of its ClientHello (lb_hello_sni),
 * which the session reads before it connects. */

/* Why a client went to default_pool, or was closed for want of a route:
 * the reason label of lb_frontend_route_default_sessions_total and
 * lb_frontend_route_closed_total. */
enum lb_route_fallback {
    LB_ROUTE_NO_SNI = 0,            /* a ClientHello without a server name */
    LB_ROUTE_NO_MATCH,              /* a name no route matches */
    LB_ROUTE_UNROUTABLE,            /* no ClientHello read (enum lb_sni_bad) */
    LB_ROUTE_FALLBACKS
};
const char *lb_route_fallback_name(enum lb_route_fallback f);   /* "no_sni", ... */

/* The pool of a client of fe whose ClientHello asked for name (as
 * lb_hello_sni gives it, "" for none), counted for its route (or the
 * fallback): NULL when it is to be closed. Any worker. */
struct lb_pool *lb_route_pick(struct lb_frontend *fe, const char *name);
/* The same for a client whose first flight gave no name (why): logged as
 * event=sni_unroutable (rate-limited) and counted; default_pool or NULL
 * as route_unknown says, NULL when is_empty (it closed having sent
 * nothing). Any worker. */
struct lb_pool *lb_route_unroutable(struct lb_frontend *fe, const char *client_text,
                                    enum lb_sni_bad why, bool is_empty);

/* --------------------------------------------------------------- udp.c
 * UDP frontends (README, "UDP"): datagrams from one client address and
 * port form a flow, pinned to one server and given one connected socket
 * towards it, so that the kernel matches the server's replies to it. A
 * worker keeps the flows of each UDP address it listens on in a table of
 * its own, which a reload that keeps the address hands to the new
 * listener: open flows live on, on their servers. */

/* Why a datagram from a client went nowhere: the reason label of
 * lb_frontend_udp_dropped_total. */
enum lb_udp_drop {
    LB_UDP_DROP_NO_SERVER = 0,      /* none in rotation, or all full */
    LB_UDP_DROP_DENIED,             /* allow / deny */
    LB_UDP_DROP_NO_SOCKET,          /* no socket for a new flow (descriptors) */
    LB_UDP_DROP_SEND_FAILED,        /* the kernel refused it (buffers, ICMP) */
    LB_UDP_DROP_TOO_MANY_FLOWS,     /* at udp_max_flows, nothing to evict here */
    LB_UDP_DROPS
};
const char *lb_udp_drop_name(enum lb_udp_drop r);   /* "no_server", ... */

struct lb_udp_table;
struct lb_flow;

/* A table for worker w's socket fd of a UDP address; NULL when out of
 * memory. */
struct lb_udp_table *lb_udp_table_new(struct lb_worker *w, int fd);
/* The frontend (of the worker's generation g) whose new flows it makes,
 * and whose udp_idle_timeout, udp_responses and log_flows its flows
 * follow from now on: at start and at each switch. */
void lb_udp_table_use(struct lb_udp_table *t, struct lb_gen *g, struct lb_frontend *fe);
/* Ends every flow (flow_end reason: why) and frees the table; the socket
 * is the caller's. */
void lb_udp_table_free(struct lb_udp_table *t, const char *why);
/* The listening socket's read event: datagrams from clients. */
void lb_udp_on_datagrams(int fd, short what, void *arg);
/* A flow's socket is readable (io_fd, LB_IO_FLOW): its server's replies. */
void lb_udp_on_flow_io(struct lb_flow *f);
/* The drain scan: ends the flows whose server's drain deadline passed
 * (at now), and lowers *next to the earliest deadline still to come. */
void lb_udp_drain_scan(struct lb_udp_table *t, uint64_t now, uint64_t *next);

/* The hash a client is balanced by (source): its address, not its port. */
uint64_t lb_client_hash(const struct sockaddr *sa);
/* A connect to srv refused or timed out (TCP; k says which), or an ICMP
 * port unreachable (UDP: refused): counted, every observe_errors in a row
 * ask for a probe now, and each is a live error (lb_worker_live_error). */
void lb_server_connect_failed(struct lb_worker *w, struct lb_server *srv,
                              enum bal_outlier_kind k);

/* ------------------------------------------------------------ session.c */

#define LB_BUF_SIZE (64 * 1024)

struct lb_buf {
    struct lb_buf *next;                /* free list link */
    char data[LB_BUF_SIZE];
};

/* Starts a session for an accepted client fd (non-blocking) of frontend fe
 * of generation gen (the worker's, or an older one a retiring listener
 * still serves): picks a server and connects. Takes ownership of fd; on
 * failure closes it and releases the connection slot. Worker thread. */
void lb_session_start(struct lb_worker *w, struct lb_gen *gen, struct lb_frontend *fe, int fd,
                      const struct sockaddr *client);
/* Draws the process's salt of session ids, once, before the workers start. */
void lb_session_salt_init(void);

/* The worker's io_ev callback: runs the events of the sessions' sockets.
 * Worker thread. */
void lb_session_dispatch(int fd, short what, void *arg);
/* The worker's again_ev callback: reads on where a read budget ran out,
 * and takes the batch after a full one. */
void lb_session_on_again(int fd, short what, void *arg);

/* The worker's pace_ev callback: starts the connects waiting for their
 * turn that fit now (session.c, "pacing"). Worker thread. */
void lb_session_on_pace(int fd, short what, void *arg);

/* Closes a session at once (shutdown_timeout); one whose queue grant is on
 * the way closes when it arrives. Worker thread. */
void lb_session_abort(struct lb_session *s, const char *reason);

/* A queued session of this worker got a slot: it connects. Worker thread. */
void lb_session_on_grant(struct lb_waiter *wt);

/* For the worker's drain scan: the next session of its list, the drain
 * deadline of the session's server (0 = none), and closing a session whose
 * deadline passed (counted as drained by timeout). Worker thread. */
struct lb_session *lb_session_next(const struct lb_session *s);
uint64_t lb_session_drain_deadline(const struct lb_session *s);
void lb_session_drain_close(struct lb_session *s);

#endif /* LB_DATA_H */
