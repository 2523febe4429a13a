/*
 * worker.c - data-path threads: one event_base each, its own listening
 * socket of every frontend (SO_REUSEPORT), its sessions, its balancer
 * cursors and its relay buffers. Nothing here takes a lock on the
 * per-connection path; the only shared figures are atomics.
 *
 * Other threads talk to a worker only through its mailbox: a new generation
 * (acknowledged on main's mailbox once the worker runs it), stop, force,
 * drain scan, and a wake-up when the daemon-wide connection cap pauses or
 * resumes accepts.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon.h"
#include "data.h"
#include "state.h"

/* Accepts per readiness event: enough to drain a burst, few enough that one
 * busy frontend does not starve the sessions of the same worker. */
#define LB_WORKER_ACCEPT_BATCH 64
/* Relay buffers kept per worker after use (64 KiB each). */
#define LB_WORKER_FREE_BUFS_MAX 32
/* Empty splice pipes kept per worker (two descriptors each). */
#define LB_WORKER_FREE_PIPES_MAX 16
#define LB_WORKER_PIPE_SIZE (256 * 1024)
/* A generation switch that ran out of memory is tried again after this. */
#define LB_WORKER_SWITCH_RETRY_MS 100
/* After EMFILE/ENFILE, how long accepts pause before the next try. */
#define LB_WORKER_EMFILE_PAUSE_MS 100
/* Workers that share a CPU hand it over at least this often (see
 * lb_worker_take_turns). */
#define LB_WORKER_TURN_US 1000
/* A listener that closes first stops taking new handshakes, then accepts
 * for this long what is queued and what completes meanwhile: a handshake
 * under way needs one round trip to end (see lb_worker_listener_retire). */
#define LB_LISTENER_CLOSE_GRACE_MS 100

/* A worker's accept event on its socket of one frontend's address. A
 * listener being closed ("retiring") is a copy of its own on the worker's
 * retiring list, which owns the socket and a reference on the generation
 * of fe until it closes. */
struct lb_listener {
    struct lb_worker *w;
    struct lb_frontend *fe;
    struct lb_gen *gen;                 /* of fe: the worker's while current
                                           (no reference of its own), one
                                           reference once retiring */
    struct lb_listen *listen;           /* NULL once closed or taken over */
    struct lb_listen *retiring_of;      /* retiring: the set its socket
                                           counts in (nopen), alive through
                                           gen */
    int fd;
    struct event *ev;
    struct lb_udp_table *udp;           /* a UDP address's flows (udp.c);
                                           NULL for TCP */
    struct lb_listener *next;           /* the retiring list */
    uint64_t close_at_ms;               /* retiring: its grace ends */
    bool is_enabled;
    bool is_retiring;
};

/* What one batch of accepts found. */
enum lb_accept_result {
    LB_ACCEPT_EMPTY = 0,                /* the queue is empty */
    LB_ACCEPT_MORE,                     /* the batch ended: look again */
    LB_ACCEPT_PAUSED,                   /* at the cap or out of descriptors */
};

/* For a retiring listener (a socket filter sees a TCP segment from its
 * header on): drops a SYN without ACK, a new handshake, which the client
 * sends again 1 s later and then finds the port closed (refused); keeps
 * everything else, among them the ACKs that complete handshakes under way. */
static struct sock_filter lb_listener_syn_drop[] = {
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13),         /* the TCP flags */
    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x12),      /* SYN | ACK */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x02, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, 0),                   /* a SYN alone: drop */
    BPF_STMT(BPF_RET | BPF_K, 0xffffffff),          /* keep */
};

static void lb_worker_on_accept(evutil_socket_t fd, short what, void *arg);
static void lb_worker_on_msgs(void *msgs, size_t n, void *arg);
static void lb_worker_on_switch_retry(evutil_socket_t fd, short what, void *arg);
static void lb_worker_on_retry_accept(evutil_socket_t fd, short what, void *arg);
static void lb_worker_on_drain_timer(evutil_socket_t fd, short what, void *arg);
static void lb_worker_on_retire_timer(evutil_socket_t fd, short what, void *arg);
static void lb_worker_sync_listeners(struct lb_worker *w);
static enum lb_accept_result lb_listener_accept(struct lb_listener *l);

/* ------------------------------------------------------------- the limit */

/* At most one max_connections_reached and one accept_resumed a second: at
 * the cap every close resumes and the next accept pauses again. Two limits,
 * so that a resume never eats the next pause's line. */
static struct lb_log_limit lb_limit_pause_log = LB_LOG_LIMIT(1);
static struct lb_log_limit lb_limit_resume_log = LB_LOG_LIMIT(1);
static struct lb_log_limit lb_accept_failed_log = LB_LOG_LIMIT(LB_LOG_CLIENT_EVENTS_PER_S);
static struct lb_log_limit lb_listener_filter_log = LB_LOG_LIMIT(1);

static void
lb_worker_pipe_close(struct lb_pipe *p)
{
    close(p->rd);
    close(p->wr);
    free(p);
}

static bool
lb_limit_reserve(struct lb_limit *l)
{
    uint32_t n = atomic_load(&l->active);

    do {
        if (n >= l->max)
            return false;
    } while (!atomic_compare_exchange_weak(&l->active, &n, n + 1));
    return true;
}

static void
lb_limit_resume(struct lb_daemon *d)
{
    bool expected = true;

    if (atomic_compare_exchange_strong(&d->limit.paused, &expected, false)) {
        lb_log_limited(&lb_limit_resume_log, CONF_LOG_INFO, "accept_resumed",
                       "active=%u limit=%u", atomic_load(&d->limit.active), d->limit.max);
        lb_workers_post(d, LB_WORKER_WAKE);
    }
}

static void
lb_limit_pause(struct lb_daemon *d)
{
    if (!atomic_exchange(&d->limit.paused, true)) {
        atomic_fetch_add_explicit(&d->limit.reached, 1, memory_order_relaxed);
        lb_log_limited(&lb_limit_pause_log, CONF_LOG_WARN, "max_connections_reached",
                       "limit=%u", d->limit.max);
        lb_workers_post(d, LB_WORKER_WAKE);
    }
    /* A session may have ended between the failed reserve and the store of
     * the flag, and seen no pause to lift: look again (both sides use
     * sequentially consistent atomics, so one of them sees the other). */
    if (atomic_load(&d->limit.active) < d->limit.max)
        lb_limit_resume(d);
}

void
lb_limit_release(struct lb_daemon *d)
{
    atomic_fetch_sub(&d->limit.active, 1);
    if (atomic_load(&d->limit.paused))
        lb_limit_resume(d);
}

/* ------------------------------------------------------------- lifecycle */

/* Listeners for every frontend of g, on this worker's socket of each
 * address. A listener of the old set (old, nold) on the same address is
 * taken over (its socket stays open: no refused connection during a
 * reload); the sockets of addresses g no longer has are closed. */
static int
lb_worker_listeners_build(struct lb_worker *w, struct lb_gen *g,
                          struct lb_listener *old, size_t nold)
{
    size_t n = g->conf->nfrontends;
    struct lb_listener *ls = calloc(n ? n : 1, sizeof(*ls));

    if (ls == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        struct lb_listener *l = &ls[i];

        l->w = w;
        l->fe = &g->frontends[i];
        l->gen = g;
        l->listen = l->fe->listen;
        l->fd = l->listen->fds[w->id];
        for (size_t k = 0; k < nold; k++) {
            if (old[k].listen == l->listen && old[k].ev != NULL) {
                event_free(old[k].ev);      /* its socket is taken over */
                old[k].ev = NULL;
                old[k].listen = NULL;
                l->udp = old[k].udp;        /* ... and its flows */
                old[k].udp = NULL;
            }
        }
        if (l->listen->type == SOCK_DGRAM && l->udp == NULL)
            l->udp = lb_udp_table_new(w, l->fd);
        if (l->udp != NULL)
            lb_udp_table_use(l->udp, g, l->fe);
        l->ev = l->listen->type == SOCK_DGRAM
                    ? (l->udp != NULL ? event_new(w->base, l->fd, EV_READ | EV_PERSIST,
                                                  lb_udp_on_datagrams, l->udp)
                                      : NULL)
                    : event_new(w->base, l->fd, EV_READ | EV_PERSIST, lb_worker_on_accept, l);
        if (l->ev == NULL) {
            /* out of memory: the flows taken over end */
            for (size_t k = 0; k <= i; k++) {
                if (ls[k].ev != NULL)
                    event_free(ls[k].ev);
                lb_udp_table_free(ls[k].udp, "reload");
            }
            free(ls);
            return -1;
        }
    }
    w->listeners = ls;
    w->nlisteners = n;
    return 0;
}

int
lb_worker_init(struct lb_worker *w, struct lb_daemon *d, unsigned id,
               char *err, size_t errlen)
{
    struct lb_gen *g = d->gen;
    const struct conf *c = g->conf;

    w->id = id;
    w->daemon = d;
    w->gen = g;
    lb_gen_ref(g);
    if (id == 0)
        lb_session_salt_init();         /* before any worker thread runs */
    w->io_fd = epoll_create1(EPOLL_CLOEXEC);
    /* The coarse clock: the precise one costs a timerfd_settime every loop
     * turn (4% of a worker's CPU on keep-alive requests). The sessions keep
     * their deadlines on the precise clock themselves (lb_session_arm). */
    w->base = lb_base_new(0);
    if (w->base == NULL || w->io_fd == -1) {
        snprintf(err, errlen, "%s failed: %s", w->base == NULL ? "lb_base_new" : "epoll_create1",
                 strerror(errno));
        return -1;
    }
    w->io_ev = event_new(w->base, w->io_fd, EV_READ | EV_PERSIST | EV_ET,
                         lb_session_dispatch, w);
    w->again_ev = evtimer_new(w->base, lb_session_on_again, w);
    if (w->io_ev == NULL || w->again_ev == NULL || event_add(w->io_ev, NULL) == -1) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    w->mailbox = lb_mailbox_new(w->base, sizeof(struct lb_worker_msg), lb_worker_on_msgs, w);
    w->retry_accept_ev = evtimer_new(w->base, lb_worker_on_retry_accept, w);
    w->drain_ev = evtimer_new(w->base, lb_worker_on_drain_timer, w);
    w->switch_retry_ev = evtimer_new(w->base, lb_worker_on_switch_retry, w);
    w->retire_ev = evtimer_new(w->base, lb_worker_on_retire_timer, w);
    w->pace_ev = event_new(w->base, -1, 0, lb_session_on_pace, w);
    w->cursors = calloc(c->npools ? c->npools : 1, sizeof(*w->cursors));
    if (w->mailbox == NULL || w->retry_accept_ev == NULL || w->drain_ev == NULL ||
        w->switch_retry_ev == NULL || w->retire_ev == NULL || w->pace_ev == NULL ||
        w->cursors == NULL || lb_worker_listeners_build(w, g, NULL, 0) == -1) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < c->npools; i++) {
        /* Different seeds: workers do not all start round robin on the
         * same server. */
        w->cursors[i] = bal_cursor_new(g->pools[i].bal, id);
        if (w->cursors[i] == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    lb_worker_sync_listeners(w);
    return 0;
}

/* Posts a message main waits for (a switch, a worker's end): one that is
 * lost would leave main waiting for good, so out of memory it tries again
 * until the post goes. */
static void
lb_worker_tell_main(struct lb_worker *w, const struct lb_main_msg *m)
{
    while (lb_mailbox_post(w->daemon->mailbox, m) == -1) {
        struct timespec pause = { 0, 10 * 1000 * 1000 };
        nanosleep(&pause, NULL);
    }
}

void
lb_worker_live_error(struct lb_worker *w, struct lb_server *srv, enum bal_outlier_kind k,
                     uint64_t began_ms)
{
    struct lb_main_msg m = { .kind = LB_MAIN_LIVE_ERROR, .worker = w->id,
                             .number = lb_mono_ms(), .began = began_ms, .server = srv->b->id,
                             .error_kind = k };

    atomic_fetch_add_explicit(&srv->b->live_errors[k], 1, memory_order_relaxed);
    /* Lost when out of memory: one error fewer in a window, no harm. */
    if (srv->pool->conf->outlier.errors > 0)
        (void)lb_mailbox_post(w->daemon->mailbox, &m);
}

/* Called after each turn of the loop of a worker that shares a CPU with
 * another. A worker that always finds events never sleeps, and the kernel
 * preempts it only at a scheduler tick (4 ms at HZ=250, with a server
 * kernel's PREEMPT_NONE): the other worker's clients wait that long. So a
 * worker that has run LB_WORKER_TURN_US gives the CPU to whoever waits for
 * it (sched_yield returns at once when nobody does). Measured on the
 * bench's keep-alive requests, 2 workers on one CPU, 16 runs each: p99
 * 1.16-3.08 ms, 1 run over 2.7 ms, against 1.19-4.62 ms and 6 runs over
 * 2.7 ms without (the medians, 1.78 and 1.64 ms, are alike: the turns cut
 * the stalls, not the common case); a worker running uninterrupted for
 * over 2 ms, 0-4 times in 3 s against 7-38. */
static void
lb_worker_take_turns(struct lb_worker *w)
{
    uint64_t now = lb_mono_us();

    if (now - w->turn_since_us >= LB_WORKER_TURN_US) {
        sched_yield();
        w->turn_since_us = lb_mono_us();
    }
}

static void *
lb_worker_main(void *arg)
{
    struct lb_worker *w = arg;

    pthread_setname_np(pthread_self(), "lb-worker");
    /* NO_EXIT_ON_EMPTY: a worker whose listeners are paused at the cap and
     * that has no session left must still wait for the resume. */
    if (w->daemon->nworkers <= w->daemon->ncpus) {
        event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY);
    } else {
        w->turn_since_us = lb_mono_us();
        do {
            event_base_loop(w->base, EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY);
            lb_worker_take_turns(w);
        } while (!event_base_got_exit(w->base) && !event_base_got_break(w->base));
    }
    /* main ends when the last worker has told it */
    lb_worker_tell_main(w, &(struct lb_main_msg){ .kind = LB_MAIN_WORKER_EXIT, .worker = w->id });
    return NULL;
}

int
lb_worker_start(struct lb_worker *w)
{
    if (pthread_create(&w->thread, NULL, lb_worker_main, w) != 0)
        return -1;
    w->daemon->workers_running++;
    return 0;
}

/* The worker's loop ends once it stops and nothing is left to serve:
 * no session, no listener still accepting what was queued. */
static void
lb_worker_exit_if_done(struct lb_worker *w)
{
    if (w->is_stopping && w->nsessions == 0 && w->retiring == NULL)
        event_base_loopexit(w->base, NULL);
}

static void
lb_worker_retire_arm(struct lb_worker *w)
{
    uint64_t now = lb_mono_ms(), next = 0;

    for (struct lb_listener *r = w->retiring; r != NULL; r = r->next) {
        if (next == 0 || r->close_at_ms < next)
            next = r->close_at_ms;
    }
    event_del(w->retire_ev);
    if (next != 0) {
        struct timeval tv = lb_tv_ms(next > now ? next - now : 0);

        event_add(w->retire_ev, &tv);
    }
}

/* Closes a retiring listener for good: what its queue still holds is
 * reset by the kernel (only at shutdown_timeout, or in fini). */
static void
lb_worker_retired_close(struct lb_worker *w, struct lb_listener *r)
{
    struct lb_listener **p = &w->retiring;

    while (*p != r)
        p = &(*p)->next;
    *p = r->next;
    if (r->ev != NULL)
        event_free(r->ev);
    close(r->fd);
    atomic_fetch_sub_explicit(&r->retiring_of->nopen, 1, memory_order_release);
    lb_gen_unref(r->gen);
    free(r);
}

/* Closing a listening socket resets the connections in its accept queue,
 * and those in the middle of their handshake (with SO_REUSEPORT each
 * worker's socket has a queue of its own), although their clients'
 * connect() succeeded. So a listener closes in two steps: a socket filter
 * stops new handshakes (their clients are refused at their SYN's
 * retransmission), and the listener accepts on, serving what is queued and
 * what completes, until LB_LISTENER_CLOSE_GRACE_MS has passed and its
 * queue is empty; at the connection cap it waits for slots like any
 * listener. Nginx and HAProxy close at once and lose those connections
 * unless the socket lives on in another process (a hand-over, HAProxy's
 * -x); Linux's tcp_migrate_req moves them only to another socket of the
 * same group, and none is left here.
 *
 * l's socket moves to a copy on the worker's retiring list (false when out
 * of memory: the caller closes it at once). Worker thread. */
static bool
lb_worker_listener_retire(struct lb_worker *w, struct lb_listener *l)
{
    struct sock_fprog prog = { .len = sizeof(lb_listener_syn_drop) / sizeof(lb_listener_syn_drop[0]),
                               .filter = lb_listener_syn_drop };
    struct lb_listener *r = malloc(sizeof(*r));
    char qbuf[128];

    if (r == NULL)
        return false;
    *r = *l;
    r->ev = event_new(w->base, l->fd, EV_READ | EV_PERSIST, lb_worker_on_accept, r);
    if (r->ev == NULL) {
        free(r);
        return false;
    }
    if (setsockopt(l->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) == -1)
        lb_log_limited(&lb_listener_filter_log, CONF_LOG_WARN, "listener_filter_failed",
                       "frontend=%s error=%s detail=\"new connections are taken until the listener closes\"",
                       l->fe->conf->name, lb_log_quote(qbuf, sizeof(qbuf), strerror(errno)));
    lb_gen_ref(r->gen);
    r->is_retiring = true;
    r->is_enabled = false;
    r->listen = NULL;
    r->retiring_of = l->listen;
    r->close_at_ms = lb_mono_ms() + LB_LISTENER_CLOSE_GRACE_MS;
    r->next = w->retiring;
    w->retiring = r;
    lb_worker_retire_arm(w);
    return true;
}

/* Stops accepting on this worker's socket of each listener in ls (those
 * not taken over by a newer set): retires it (above), or closes it at
 * once after a hand-over (the new process accepts from the same socket:
 * nothing is lost, and a filter would stop its listener too) or past
 * shutdown_timeout. The caller syncs the listeners afterwards. */
static void
lb_worker_listeners_close(struct lb_worker *w, struct lb_listener *ls, size_t n)
{
    for (size_t i = 0; ls != NULL && i < n; i++) {
        struct lb_listener *l = &ls[i];

        if (l->ev != NULL)
            event_free(l->ev);
        l->ev = NULL;
        /* A UDP socket has no queue of half-open clients to serve first,
         * and its flows' replies leave from it: both end now. */
        lb_udp_table_free(l->udp, w->is_stopping ? "shutdown" : "reload");
        l->udp = NULL;
        if (l->listen != NULL && l->listen->fds[w->id] >= 0) {
            if (w->is_handed_over || w->is_forced || l->listen->type == SOCK_DGRAM ||
                !lb_worker_listener_retire(w, l)) {
                close(l->listen->fds[w->id]);
                atomic_fetch_sub_explicit(&l->listen->nopen, 1, memory_order_release);
            }
            /* the retiring copy owns the socket now: the listen set never
             * closes it */
            l->listen->fds[w->id] = -1;
        }
        l->listen = NULL;
        l->is_enabled = false;
    }
}

static void
lb_worker_on_retire_timer(evutil_socket_t fd, short what, void *arg)
{
    struct lb_worker *w = arg;
    uint64_t now = lb_mono_ms();

    for (struct lb_listener *r = w->retiring, *next; r != NULL; r = next) {
        enum lb_accept_result res;

        next = r->next;
        if (r->close_at_ms > now)
            continue;
        do {
            res = lb_listener_accept(r);
        } while (res == LB_ACCEPT_MORE);
        if (res == LB_ACCEPT_EMPTY)
            lb_worker_retired_close(w, r);
        else                            /* paused: look again later, or its */
            r->close_at_ms = now + LB_LISTENER_CLOSE_GRACE_MS;  /* accept event
                                           finds the queue empty first */
    }
    lb_worker_retire_arm(w);
    lb_worker_exit_if_done(w);
}

static void
lb_worker_close_listeners(struct lb_worker *w)
{
    lb_worker_listeners_close(w, w->listeners, w->nlisteners);
}

static void
lb_worker_cursors_free(struct lb_worker *w)
{
    if (w->cursors == NULL)
        return;
    for (size_t i = 0; i < w->gen->conf->npools; i++)
        bal_cursor_free(w->cursors[i]);
    free(w->cursors);
    w->cursors = NULL;
}

/* Moves the worker to generation ng (whose reference it now owns): new
 * listeners and cursors; the old generation lives on in its sessions.
 * false when out of memory: it stays on the old generation, which still
 * serves, and keeps ng to try again. */
static bool
lb_worker_switch(struct lb_worker *w, struct lb_gen *ng)
{
    struct lb_listener *old = w->listeners;
    size_t nold = w->nlisteners;
    struct bal_cursor **cursors = calloc(ng->conf->npools ? ng->conf->npools : 1,
                                         sizeof(*cursors));
    bool ok = cursors != NULL;

    for (size_t i = 0; ok && i < ng->conf->npools; i++) {
        cursors[i] = bal_cursor_new(ng->pools[i].bal, w->id);
        ok = cursors[i] != NULL;
    }
    if (!ok || lb_worker_listeners_build(w, ng, old, nold) == -1) {
        for (size_t i = 0; cursors != NULL && i < ng->conf->npools; i++)
            bal_cursor_free(cursors[i]);
        free(cursors);
        return false;
    }
    lb_worker_listeners_close(w, old, nold);
    free(old);
    lb_worker_cursors_free(w);
    w->cursors = cursors;
    lb_gen_unref(w->gen);
    w->gen = ng;
    if (w->is_stopping)
        lb_worker_close_listeners(w);
    lb_worker_sync_listeners(w);        /* the retiring ones too */
    return true;
}

/* Switches to ng, or keeps it for a retry; main hears of the switch only
 * once it happened, with the generation actually in use. */
static void
lb_worker_switch_to(struct lb_worker *w, struct lb_gen *ng)
{
    struct lb_main_msg m = { .kind = LB_MAIN_SWITCHED, .worker = w->id, .number = ng->number };
    struct timeval retry = { 0, LB_WORKER_SWITCH_RETRY_MS * 1000 };

    if (w->switch_pending != NULL && w->switch_pending != ng)
        lb_gen_unref(w->switch_pending);    /* a newer one replaces it */
    w->switch_pending = NULL;
    if (!lb_worker_switch(w, ng)) {
        lb_log(CONF_LOG_ERROR, "reload_worker_failed", "worker=%u error=\"out of memory\" retry_ms=%d",
               w->id, LB_WORKER_SWITCH_RETRY_MS);
        w->switch_pending = ng;
        event_add(w->switch_retry_ev, &retry);
        return;
    }
    event_del(w->switch_retry_ev);
    lb_worker_tell_main(w, &m);             /* the reload waits for it */
}

static void
lb_worker_on_switch_retry(evutil_socket_t fd, short what, void *arg)
{
    struct lb_worker *w = arg;

    if (w->switch_pending != NULL)
        lb_worker_switch_to(w, w->switch_pending);
}

/* Messages the worker never took: the generations they carry are ours to
 * release. */
static void
lb_worker_drop_msgs(void *msgs, size_t n, void *arg)
{
    const struct lb_worker_msg *m = msgs;

    for (size_t i = 0; i < n; i++) {
        if (m[i].kind == LB_WORKER_SWITCH)
            lb_gen_unref(m[i].gen);
    }
}

void
lb_worker_fini(struct lb_worker *w)
{
    lb_mailbox_free(w->mailbox, lb_worker_drop_msgs, w);
    w->mailbox = NULL;
    if (w->switch_pending != NULL)
        lb_gen_unref(w->switch_pending);
    w->switch_pending = NULL;
    w->is_forced = true;                /* the thread is gone: close at once */
    if (w->gen != NULL) {
        lb_worker_close_listeners(w);
        lb_worker_cursors_free(w);
    }
    while (w->retiring != NULL)
        lb_worker_retired_close(w, w->retiring);
    if (w->retire_ev != NULL)
        event_free(w->retire_ev);
    w->retire_ev = NULL;
    if (w->pace_ev != NULL)
        event_free(w->pace_ev);
    w->pace_ev = NULL;
    free(w->paces);
    w->paces = NULL;
    w->npaces = 0;
    free(w->listeners);
    w->listeners = NULL;
    if (w->udp_buf != NULL)
        free(w->udp_buf);
    w->udp_buf = NULL;
    while (w->free_bufs != NULL) {
        struct lb_buf *b = w->free_bufs;
        w->free_bufs = b->next;
        free(b);
    }
    while (w->free_pipes != NULL) {
        struct lb_pipe *p = w->free_pipes;
        w->free_pipes = p->next;
        lb_worker_pipe_close(p);
    }
    w->nfree_pipes = 0;
    if (w->switch_retry_ev != NULL)
        event_free(w->switch_retry_ev);
    w->switch_retry_ev = NULL;
    if (w->retry_accept_ev != NULL)
        event_free(w->retry_accept_ev);
    if (w->drain_ev != NULL)
        event_free(w->drain_ev);
    w->drain_ev = NULL;
    if (w->io_ev != NULL)
        event_free(w->io_ev);
    w->io_ev = NULL;
    if (w->again_ev != NULL)
        event_free(w->again_ev);
    w->again_ev = NULL;
    if (w->daemon != NULL && w->io_fd >= 0)     /* init ran: io_fd is ours */
        close(w->io_fd);
    w->io_fd = -1;
    if (w->base != NULL)
        event_base_free(w->base);
    if (w->gen != NULL)
        lb_gen_unref(w->gen);
    w->retry_accept_ev = NULL;
    w->base = NULL;
    w->gen = NULL;
}

int
lb_worker_post(struct lb_worker *w, enum lb_worker_msg_kind kind, struct lb_gen *gen)
{
    struct lb_worker_msg m = { .kind = kind, .gen = gen };

    return lb_mailbox_post(w->mailbox, &m);
}

int
lb_worker_post_grant(struct lb_worker *w, struct lb_waiter *wt)
{
    struct lb_worker_msg m = { .kind = LB_WORKER_GRANT, .waiter = wt };

    return lb_mailbox_post(w->mailbox, &m);
}

void
lb_workers_post(struct lb_daemon *d, enum lb_worker_msg_kind kind)
{
    for (size_t i = 0; i < d->nworkers; i++) {
        if (lb_worker_post(&d->workers[i], kind, NULL) == -1)
            lb_log(CONF_LOG_ERROR, "worker_message_lost", "worker=%zu error=\"out of memory\"", i);
    }
}

/* ------------------------------------------------------------- accepting */

static void
lb_listener_enable(struct lb_listener *l, bool want)
{
    if (l->ev == NULL || l->is_enabled == want)
        return;
    if (want)
        event_add(l->ev, NULL);
    else
        event_del(l->ev);
    l->is_enabled = want;
}

/* Accepts where the cap and the descriptors allow; a stopping worker's
 * only listeners are the retiring ones. */
static void
lb_worker_sync_listeners(struct lb_worker *w)
{
    bool can = !w->is_accept_paused_emfile && !atomic_load(&w->daemon->limit.paused);

    /* the connection cap and the descriptors pause accepts, not datagrams */
    for (size_t i = 0; i < w->nlisteners; i++)
        lb_listener_enable(&w->listeners[i], (can || w->listeners[i].udp != NULL) &&
                                                 !w->is_stopping);
    for (struct lb_listener *r = w->retiring; r != NULL; r = r->next)
        lb_listener_enable(r, can);
}

/* One batch of accepts on l. */
static enum lb_accept_result
lb_listener_accept(struct lb_listener *l)
{
    struct lb_worker *w = l->w;
    struct lb_daemon *d = w->daemon;
    char qbuf[128];

    for (int i = 0; i < LB_WORKER_ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int cfd;

        /* Reserve the slot first: past the cap the connection stays in the
         * kernel's accept queue instead of being accepted and dropped. */
        if (!lb_limit_reserve(&d->limit)) {
            lb_worker_sync_listeners(w);    /* this worker at once */
            lb_limit_pause(d);
            return LB_ACCEPT_PAUSED;
        }
        cfd = accept4(l->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            int err = errno;

            lb_limit_release(d);
            if (err == EAGAIN || err == EWOULDBLOCK)
                return LB_ACCEPT_EMPTY;
            if (err == EINTR)
                return LB_ACCEPT_MORE;
            if (err == ECONNABORTED)
                continue;
            /* Out of descriptors or memory: the listener stays readable, so
             * pause it briefly instead of spinning (as haproxy does). */
            atomic_fetch_add_explicit(&l->fe->stats->accept_failures, 1, memory_order_relaxed);
            lb_log_limited(&lb_accept_failed_log, CONF_LOG_WARN, "accept_failed",
                           "frontend=%s error=%s pause_ms=%d", l->fe->conf->name,
                           lb_log_quote(qbuf, sizeof(qbuf), strerror(err)),
                           LB_WORKER_EMFILE_PAUSE_MS);
            w->is_accept_paused_emfile = true;
            lb_worker_sync_listeners(w);
            struct timeval tv = { 0, LB_WORKER_EMFILE_PAUSE_MS * 1000 };
            event_add(w->retry_accept_ev, &tv);
            return LB_ACCEPT_PAUSED;
        }
        lb_session_start(w, l->gen, l->fe, cfd, (struct sockaddr *)&ss);
    }
    return LB_ACCEPT_MORE;
}

static void
lb_worker_on_accept(evutil_socket_t fd, short what, void *arg)
{
    struct lb_listener *l = arg;

    if (lb_listener_accept(l) == LB_ACCEPT_EMPTY && l->is_retiring &&
        lb_mono_ms() >= l->close_at_ms) {
        struct lb_worker *w = l->w;

        lb_worker_retired_close(w, l);      /* frees l */
        lb_worker_retire_arm(w);
        lb_worker_exit_if_done(w);
    }
}

static void
lb_worker_on_retry_accept(evutil_socket_t fd, short what, void *arg)
{
    struct lb_worker *w = arg;

    w->is_accept_paused_emfile = false;
    lb_worker_sync_listeners(w);
}

/* ---------------------------------------------------------------- stopping */

void
lb_worker_session_gone(struct lb_worker *w)
{
    lb_worker_exit_if_done(w);
}

/* Closes the sessions whose server's drain deadline has passed, and arms
 * the drain timer for the next deadline. Sessions of servers in rotation
 * have no deadline. O(sessions): it runs when a server leaves rotation and
 * when a deadline comes, not per connection. */
static void
lb_worker_drain_scan(struct lb_worker *w)
{
    uint64_t now = lb_mono_ms(), next = 0;
    struct lb_session *s = w->sessions;

    while (s != NULL) {
        struct lb_session *following = lb_session_next(s);
        uint64_t deadline = lb_session_drain_deadline(s);

        if (deadline != 0 && deadline <= now)
            lb_session_drain_close(s);      /* frees s */
        else if (deadline != 0 && (next == 0 || deadline < next))
            next = deadline;
        s = following;
    }
    for (size_t i = 0; i < w->nlisteners; i++) {
        if (w->listeners[i].udp != NULL)
            lb_udp_drain_scan(w->listeners[i].udp, now, &next);
    }
    event_del(w->drain_ev);
    if (next != 0) {
        struct timeval tv = lb_tv_ms(next - now);

        event_add(w->drain_ev, &tv);
    }
}

static void
lb_worker_on_drain_timer(evutil_socket_t fd, short what, void *arg)
{
    lb_worker_drain_scan(arg);
}

static void
lb_worker_on_msgs(void *msgs, size_t n, void *arg)
{
    struct lb_worker *w = arg;
    const struct lb_worker_msg *m = msgs;
    bool is_drain = false;

    for (size_t i = 0; i < n; i++) {
        switch (m[i].kind) {
        case LB_WORKER_SWITCH:
            lb_worker_switch_to(w, m[i].gen);
            break;
        case LB_WORKER_STOP:
        case LB_WORKER_STOP_HANDED_OVER:
            if (w->is_stopping)
                break;
            /* Closing (not just disabling) the sockets makes the kernel
             * refuse new connections (once retired, lb_worker_listeners_close). */
            w->is_stopping = true;
            w->is_handed_over = m[i].kind == LB_WORKER_STOP_HANDED_OVER;
            lb_worker_close_listeners(w);
            break;
        case LB_WORKER_FORCE: {
            uint64_t closed = 0;

            /* shutdown_timeout: what the listeners still hold is reset */
            w->is_forced = true;
            while (w->retiring != NULL)
                lb_worker_retired_close(w, w->retiring);
            event_del(w->retire_ev);

            /* A session whose queue grant is on the way stays until the
             * grant arrives (lb_session_abort), so walk rather than pop. */
            for (struct lb_session *s = w->sessions, *next; s != NULL; s = next) {
                next = lb_session_next(s);
                lb_session_abort(s, "shutdown timeout");
                closed++;
            }
            atomic_fetch_add(&w->daemon->forced_closes, closed);
            break;
        }
        case LB_WORKER_DRAIN:
            is_drain = true;            /* one scan for the whole batch */
            break;
        case LB_WORKER_WAKE:
            break;                      /* the sync below reads the flag */
        case LB_WORKER_GRANT:
            lb_session_on_grant(m[i].waiter);
            break;
        }
    }
    if (is_drain)
        lb_worker_drain_scan(w);
    lb_worker_sync_listeners(w);
    lb_worker_exit_if_done(w);
}

/* --------------------------------------------------------------- buffers */

struct lb_buf *
lb_worker_buf_get(struct lb_worker *w)
{
    struct lb_buf *b = w->free_bufs;

    if (b != NULL) {
        w->free_bufs = b->next;
        w->nfree_bufs--;
        return b;
    }
    return malloc(sizeof(*b));
}

void
lb_worker_buf_put(struct lb_worker *w, struct lb_buf *b)
{
    if (w->nfree_bufs >= LB_WORKER_FREE_BUFS_MAX) {
        free(b);
        return;
    }
    b->next = w->free_bufs;
    w->free_bufs = b;
    w->nfree_bufs++;
}

struct lb_pipe *
lb_worker_pipe_get(struct lb_worker *w)
{
    struct lb_pipe *p = w->free_pipes;
    int fds[2];

    if (p != NULL) {
        w->free_pipes = p->next;
        w->nfree_pipes--;
        return p;
    }
    if ((p = malloc(sizeof(*p))) == NULL)
        return NULL;
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == -1) {
        free(p);
        return NULL;
    }
    p->rd = fds[0];
    p->wr = fds[1];
    /* Room for LB_WORKER_PIPE_SIZE bytes a move instead of the default
     * 16 pages; failing that (pipe-max-size), the default serves. */
    (void)fcntl(p->wr, F_SETPIPE_SZ, LB_WORKER_PIPE_SIZE);
    return p;
}

void
lb_worker_pipe_put(struct lb_worker *w, struct lb_pipe *p, bool is_empty)
{
    if (!is_empty || w->nfree_pipes >= LB_WORKER_FREE_PIPES_MAX) {
        lb_worker_pipe_close(p);
        return;
    }
    p->next = w->free_pipes;
    w->free_pipes = p;
    w->nfree_pipes++;
}
