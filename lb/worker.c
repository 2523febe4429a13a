/*
 * worker.c - data-path threads: one event_base each, its own listening
 * socket of every frontend (SO_REUSEPORT), its sessions, its balancer
 * cursors and its relay buffers. Nothing here takes a lock on the
 * per-connection path; the only shared figures are atomics.
 *
 * Other threads talk to a worker by setting one of its request flags (or the
 * daemon-wide pause flag) and calling lb_worker_notify(), which activates
 * notify_ev in the worker's base; the worker then reads the flags itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "lb.h"

/* Accepts per readiness event: enough to drain a burst, few enough that one
 * busy frontend does not starve the sessions of the same worker. */
#define LB_WORKER_ACCEPT_BATCH 64
/* Relay buffers kept per worker after use (64 KiB each). */
#define LB_WORKER_FREE_BUFS_MAX 32
/* After EMFILE/ENFILE, how long accepts pause before the next try. */
#define LB_WORKER_EMFILE_PAUSE_MS 100
/* At most one max_connections_reached / accept_resumed pair per second:
 * at the cap every close resumes and the next accept pauses again. */
#define LB_LIMIT_LOG_INTERVAL_MS 1000

/* A worker's accept event on its socket of one frontend's address. */
struct lb_listener {
    struct lb_worker *w;
    struct lb_frontend *fe;
    struct lb_listen *listen;           /* NULL once closed or taken over */
    int fd;
    struct event *ev;
    bool is_enabled;
};

static void lb_worker_on_accept(evutil_socket_t fd, short what, void *arg);
static void lb_worker_on_notify(evutil_socket_t fd, short what, void *arg);
static void lb_worker_on_retry_accept(evutil_socket_t fd, short what, void *arg);
static void lb_worker_on_drain_timer(evutil_socket_t fd, short what, void *arg);
static void lb_worker_sync_listeners(struct lb_worker *w);

/* ------------------------------------------------------------- the limit */

static _Atomic uint64_t lb_limit_last_log_ms;

static bool
lb_limit_should_log(void)
{
    uint64_t now = lb_mono_ms();
    uint64_t last = atomic_load_explicit(&lb_limit_last_log_ms, memory_order_relaxed);

    return (last == 0 || now - last >= LB_LIMIT_LOG_INTERVAL_MS) &&
           atomic_compare_exchange_strong(&lb_limit_last_log_ms, &last, now ? now : 1);
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
        if (lb_limit_should_log())
            lb_log(CONF_LOG_INFO, "accept_resumed", "active=%u limit=%u",
                   atomic_load(&d->limit.active), d->limit.max);
        lb_workers_notify(d);
    }
}

static void
lb_limit_pause(struct lb_daemon *d)
{
    if (!atomic_exchange(&d->limit.paused, true)) {
        if (lb_limit_should_log())
            lb_log(CONF_LOG_WARN, "max_connections_reached", "limit=%u", d->limit.max);
        lb_workers_notify(d);
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
        l->listen = l->fe->listen;
        l->fd = l->listen->fds[w->id];
        for (size_t k = 0; k < nold; k++) {
            if (old[k].listen == l->listen && old[k].ev != NULL) {
                event_free(old[k].ev);      /* its socket is taken over */
                old[k].ev = NULL;
                old[k].listen = NULL;
            }
        }
        l->ev = event_new(w->base, l->fd, EV_READ | EV_PERSIST, lb_worker_on_accept, l);
        if (l->ev == NULL) {
            for (size_t k = 0; k < i; k++)
                event_free(ls[k].ev);
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
    w->base = event_base_new();
    if (w->base == NULL) {
        snprintf(err, errlen, "event_base_new failed");
        return -1;
    }
    w->notify_ev = event_new(w->base, -1, 0, lb_worker_on_notify, w);
    w->retry_accept_ev = evtimer_new(w->base, lb_worker_on_retry_accept, w);
    w->drain_ev = evtimer_new(w->base, lb_worker_on_drain_timer, w);
    w->cursors = calloc(c->npools ? c->npools : 1, sizeof(*w->cursors));
    if (w->notify_ev == NULL || w->retry_accept_ev == NULL || w->drain_ev == NULL ||
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

static void *
lb_worker_main(void *arg)
{
    struct lb_worker *w = arg;
    struct lb_daemon *d = w->daemon;

    pthread_setname_np(pthread_self(), "lb-worker");
    /* NO_EXIT_ON_EMPTY: a worker whose listeners are paused at the cap and
     * that has no session left must still wait for the resume. */
    event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY);
    atomic_fetch_sub(&d->workers_running, 1);
    event_active(d->worker_exit_ev, EV_READ, 0);
    return NULL;
}

int
lb_worker_start(struct lb_worker *w)
{
    atomic_fetch_add(&w->daemon->workers_running, 1);
    if (pthread_create(&w->thread, NULL, lb_worker_main, w) != 0) {
        atomic_fetch_sub(&w->daemon->workers_running, 1);
        return -1;
    }
    return 0;
}

/* Stops accepting and closes this worker's socket of each listener in
 * ls (those not taken over by a newer set). */
static void
lb_worker_listeners_close(struct lb_worker *w, struct lb_listener *ls, size_t n)
{
    for (size_t i = 0; ls != NULL && i < n; i++) {
        struct lb_listener *l = &ls[i];

        if (l->ev != NULL)
            event_free(l->ev);
        l->ev = NULL;
        if (l->listen != NULL && l->listen->fds[w->id] >= 0) {
            close(l->listen->fds[w->id]);
            l->listen->fds[w->id] = -1;
        }
        l->listen = NULL;
        l->is_enabled = false;
    }
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
 * listeners and cursors; the old generation lives on in its sessions. */
static void
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
        /* Out of memory: stay on the old generation, which still serves. */
        for (size_t i = 0; cursors != NULL && i < ng->conf->npools; i++)
            bal_cursor_free(cursors[i]);
        free(cursors);
        lb_gen_unref(ng);
        lb_log(CONF_LOG_ERROR, "reload_worker_failed", "worker=%u error=\"out of memory\"", w->id);
        return;
    }
    lb_worker_listeners_close(w, old, nold);
    free(old);
    lb_worker_cursors_free(w);
    w->cursors = cursors;
    lb_gen_unref(w->gen);
    w->gen = ng;
    if (w->is_stopping)
        lb_worker_close_listeners(w);
    else
        lb_worker_sync_listeners(w);
}

void
lb_worker_fini(struct lb_worker *w)
{
    struct lb_gen *pending = atomic_exchange(&w->pending_gen, NULL);

    if (pending != NULL)
        lb_gen_unref(pending);
    if (w->gen != NULL) {
        lb_worker_close_listeners(w);
        lb_worker_cursors_free(w);
    }
    free(w->listeners);
    w->listeners = NULL;
    while (w->free_bufs != NULL) {
        struct lb_buf *b = w->free_bufs;
        w->free_bufs = b->next;
        free(b);
    }
    if (w->notify_ev != NULL)
        event_free(w->notify_ev);
    if (w->retry_accept_ev != NULL)
        event_free(w->retry_accept_ev);
    if (w->drain_ev != NULL)
        event_free(w->drain_ev);
    w->drain_ev = NULL;
    if (w->base != NULL)
        event_base_free(w->base);
    if (w->gen != NULL)
        lb_gen_unref(w->gen);
    w->notify_ev = w->retry_accept_ev = NULL;
    w->base = NULL;
    w->gen = NULL;
}

void
lb_workers_notify(struct lb_daemon *d)
{
    for (size_t i = 0; i < d->nworkers; i++)
        lb_worker_notify(&d->workers[i]);
}

void
lb_worker_notify(struct lb_worker *w)
{
    /* Safe from any thread: evthread_use_pthreads() made the base
     * notifiable, and activating an event that is already active is a
     * no-op, so wake-ups coalesce. */
    event_active(w->notify_ev, EV_READ, 0);
}

/* ------------------------------------------------------------- accepting */

static void
lb_worker_sync_listeners(struct lb_worker *w)
{
    bool want = !w->is_stopping && !w->is_accept_paused_emfile &&
                !atomic_load(&w->daemon->limit.paused);

    for (size_t i = 0; i < w->nlisteners; i++) {
        struct lb_listener *l = &w->listeners[i];

        if (l->ev == NULL || l->is_enabled == want)
            continue;
        if (want)
            event_add(l->ev, NULL);
        else
            event_del(l->ev);
        l->is_enabled = want;
    }
}

static void
lb_worker_on_accept(evutil_socket_t fd, short what, void *arg)
{
    struct lb_listener *l = arg;
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
            return;
        }
        cfd = accept4(fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            int err = errno;

            lb_limit_release(d);
            if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
                return;
            if (err == ECONNABORTED)
                continue;
            /* Out of descriptors or memory: the listener stays readable, so
             * pause it briefly instead of spinning (as haproxy does). */
            lb_log(CONF_LOG_WARN, "accept_failed", "frontend=%s error=%s pause_ms=%d",
                   l->fe->conf->name, lb_log_quote(qbuf, sizeof(qbuf), strerror(err)),
                   LB_WORKER_EMFILE_PAUSE_MS);
            w->is_accept_paused_emfile = true;
            lb_worker_sync_listeners(w);
            struct timeval tv = { 0, LB_WORKER_EMFILE_PAUSE_MS * 1000 };
            event_add(w->retry_accept_ev, &tv);
            return;
        }
        lb_session_start(w, l->fe, cfd, (struct sockaddr *)&ss, len);
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
    if (w->is_stopping && w->nsessions == 0)
        event_base_loopexit(w->base, NULL);
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
    event_del(w->drain_ev);
    if (next != 0) {
        uint64_t ms = next - now;
        struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
                              .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
        event_add(w->drain_ev, &tv);
    }
}

static void
lb_worker_on_drain_timer(evutil_socket_t fd, short what, void *arg)
{
    lb_worker_drain_scan(arg);
}

static void
lb_worker_on_notify(evutil_socket_t fd, short what, void *arg)
{
    struct lb_worker *w = arg;
    struct lb_gen *ng = atomic_exchange(&w->pending_gen, NULL);

    if (ng != NULL) {
        uint64_t number = ng->number;

        lb_worker_switch(w, ng);
        atomic_store(&w->gen_number, number);   /* main waits for this */
    }

    if (atomic_load(&w->stop_requested) && !w->is_stopping) {
        /* Closing (not just disabling) the sockets makes the kernel refuse
         * new connections at once. */
        w->is_stopping = true;
        lb_worker_close_listeners(w);
        event_del(w->retry_accept_ev);
    }
    if (atomic_load(&w->force_requested)) {
        uint64_t closed = 0;

        while (w->sessions != NULL) {
            lb_session_abort(w->sessions, "shutdown timeout");
            closed++;
        }
        atomic_fetch_add(&w->daemon->forced_closes, closed);
    }
    /* Notifications also come at the connection cap, once per close: scan
     * the sessions only when a server has started to drain since the last
     * scan (the drain timer covers deadlines still ahead). */
    if (atomic_load(&w->daemon->drain_epoch) != w->drain_epoch_seen) {
        w->drain_epoch_seen = atomic_load(&w->daemon->drain_epoch);
        lb_worker_drain_scan(w);
    }
    if (w->is_stopping) {
        if (w->nsessions == 0)
            event_base_loopexit(w->base, NULL);
        return;
    }
    lb_worker_sync_listeners(w);
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
