/*
 * reload.c - SIGHUP and POST /reload: move to a new config without dropping
 * a connection and without forgetting what the health checks know.
 *
 *   1. Parse and validate the whole file, once it is done being written.
 *      Bad: nothing changes.
 *   2. Build the new generation next to the old one. Kept servers share
 *      their state (struct lb_backend), kept addresses their sockets, so
 *      nothing is copied and nothing is lost; new addresses are bound now,
 *      and a bind error fails the reload before anything changed.
 *   3. Move the health checks to the new server set (a bad CA file fails
 *      here, still before anything changed).
 *   4. Commit under state_lock: swap the generation and decide every pool
 *      (server.c): removed servers leave rotation and drain with their
 *      pool's drain_timeout, new ones wait for their first passing probe.
 *      A pool that would lose serving servers while new ones are still
 *      pending warms first: its removed servers keep serving, and the
 *      workers keep the old generation, until no new server is pending
 *      (each first probe passed or failed) or LB_RELOAD_WARM_MAX_MS, then
 *      the removed servers leave and drain (a blue/green switch never
 *      leaves a pool empty for a probe's time).
 *   5. Post the generation to every worker's mailbox and go back to the
 *      loop. Each worker acknowledges its switch on main's mailbox; with
 *      the last acknowledgement the reload is done: it is logged, counted
 *      and answered (POST /reload), and replaced generations without
 *      sessions are freed. The others go with their last session.
 *
 * Steps 1 to 3 hold no lock: the admin port keeps answering and health
 * verdicts keep coming while a file is parsed, sockets bound and CA files
 * loaded. Main thread. One reload at a time: asking for one while another
 * waits for its workers makes exactly one more after it, which reads the
 * file as it is then (a burst of SIGHUPs makes one or two reloads).
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "daemon.h"
#include "data.h"
#include "reload.h"
#include "reload_int.h"
#include "state.h"
#include "tier.h"

/* How often replaced generations are checked for their last session. */
#define LB_RELOAD_CLEANUP_MS 500
/* The longest warm-up: new servers' first probes start at once and end
 * within check_timeout; a second more covers a busy health thread. The
 * cap keeps a reload (and its POST /reload) short with a long timeout. */
#define LB_RELOAD_WARM_SLACK_MS 1000
#define LB_RELOAD_WARM_MAX_MS 10000
/* A reload reads only a version of the file that has not changed for
 * QUIET ms: one written in place is taken once its writer is done, not
 * half way (a watcher that signals at the first write, an editor, a deploy
 * tool that writes in several calls), and a file that keeps changing for
 * QUIET_MAX ms fails the reload. Main does not wait for it: a timer tries
 * again (settle_ev), and health verdicts go on meanwhile. A file replaced
 * by rename (the README's advice) costs at most QUIET ms. */
#define LB_RELOAD_QUIET_MS 50
#define LB_RELOAD_QUIET_MAX_MS 1000

/* A committed reload waiting for the workers to switch. */
struct lb_reload_run {
    const char *trigger;
    bool is_file;                       /* reads the file (else: members) */
    uint64_t number;                    /* the new generation */
    struct lb_reload_waiters file_waiters;      /* POST /reload requests it
                                                   answers */
    struct lb_reload_waiters members_waiters;   /* admin API changes it
                                                   applies */
    uint64_t started_ms;
    size_t added, removed;
    size_t switched;                    /* workers acknowledged */
    size_t warm_held;                   /* removed servers serving while
                                           the new ones warm */
    struct lb_gen *old;                 /* warming: the generation the
                                           workers still run (a reference) */
    bool is_warm_over;                  /* the workers were told to switch */
    uint64_t warm_ms;                   /* how long the warm-up took */
};

static void lb_reload_finish_if_switched(struct lb_daemon *d);
static void lb_reload_start(struct lb_daemon *d, const char *trigger, bool is_file);
static void lb_reload_warm_start(struct lb_daemon *d, struct lb_reload_run *run);
static void lb_reload_free_unused(struct lb_daemon *d);
static void lb_reload_end(struct lb_daemon *d, const char *trigger, int rc, const char *err,
                          struct lb_reload_run *run);
static void lb_reload_next(struct lb_daemon *d);
static bool lb_reload_wait(struct lb_daemon *d, struct lb_reload_waiters *ws,
                           lb_reload_done_pt done, void *arg);

/* The service manager sees a reload from its start to its end, failed or
 * not (systemd's RELOADING=1 ... READY=1; MONOTONIC_USEC is what
 * Type=notify-reload asks for). */
static void
lb_reload_notify(bool is_start)
{
    char state[96];
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    if (is_start)
        snprintf(state, sizeof(state), "RELOADING=1\nMONOTONIC_USEC=%llu",
                 (unsigned long long)now.tv_sec * 1000000 + (unsigned long long)now.tv_nsec / 1000);
    else
        snprintf(state, sizeof(state), "READY=1");
    if (lb_net_notify(state) == -1)
        lb_log(CONF_LOG_WARN, "notify_failed", "error=\"%s\"", strerror(errno));
}

/* Settings that need a restart: the new file's value is replaced by the one
 * in use, and the operator is told. */
static void
lb_reload_keep_restart_settings(const struct conf *cur, struct conf *next)
{
    if (next->global.workers != cur->global.workers) {
        lb_log(CONF_LOG_WARN, "reload_keeps", "key=workers value=%u new=%u detail=\"restart to change\"",
               cur->global.workers, next->global.workers);
        next->global.workers = cur->global.workers;
    }
    if (next->health.threads != cur->health.threads) {
        lb_log(CONF_LOG_WARN, "reload_keeps", "key=threads value=%u new=%u detail=\"restart to change\"",
               cur->health.threads, next->health.threads);
        next->health.threads = cur->health.threads;
    }
    if (next->admin.listen.len != cur->admin.listen.len ||
        memcmp(&next->admin.listen.ss, &cur->admin.listen.ss, cur->admin.listen.len) != 0) {
        lb_log(CONF_LOG_WARN, "reload_keeps", "key=listen section=admin value=%s new=%s detail=\"restart to change\"",
               cur->admin.listen.text, next->admin.listen.text);
        next->admin.listen = cur->admin.listen;
    }
    if (next->global.log_target != cur->global.log_target ||
        strcmp(next->global.syslog_socket, cur->global.syslog_socket) != 0)
        lb_log(CONF_LOG_WARN, "reload_keeps", "key=log_target detail=\"restart to change where lines go\"");
    if (strcmp(next->global.control_socket, cur->global.control_socket) != 0) {
        char *kept = strdup(cur->global.control_socket);

        lb_log(CONF_LOG_WARN, "reload_keeps", "key=control_socket value=%s new=%s detail=\"restart to change\"",
               cur->global.control_socket, next->global.control_socket);
        if (kept != NULL) {
            free(next->global.control_socket);
            next->global.control_socket = kept;
        }
    }
}

static int
lb_reload_retire_gen(struct lb_daemon *d, struct lb_gen *old)
{
    struct lb_gen **r = realloc(d->reload->fig.retired, (d->reload->fig.nretired + 1) * sizeof(*r));

    if (r == NULL)
        return -1;
    d->reload->fig.retired = r;
    d->reload->fig.retired[d->reload->fig.nretired++] = old;
    return 0;
}

/* Steps 1 to 4. On success (0) run's added, removed and warm_held count
 * the servers; 1: the file is being written, try again in *retry_ms (err
 * says so for a caller that gives up); -1: failed, err says why. */
static int
lb_reload_commit(struct lb_daemon *d, char *err, size_t errlen, struct lb_reload_run *run,
                 uint64_t *retry_ms)
{
    struct lb_gen *old = d->gen, *ng;
    struct conf *file = NULL, *conf;
    char *errors = NULL;
    int rc;

    if (lb_tier_is_stopping(d)) {
        snprintf(err, errlen, "shutting down");
        return -1;
    }
    if (run->is_file) {
        rc = conf_load_settled(d->path, LB_RELOAD_QUIET_MS, &file, &errors, retry_ms);
        if (rc != 0) {
            size_t n;

            if (errors == NULL)
                rc = -1;                /* out of memory */
            snprintf(err, errlen, "%s", errors != NULL ? errors : "out of memory");
            n = strlen(err);
            while (n > 0 && err[n - 1] == '\n')
                err[--n] = '\0';
            free(errors);
            return rc;
        }
        lb_reload_keep_restart_settings(d->file_conf, file);
    }
    /* The generation's config: the file's, and the members (members.c). */
    conf = conf_dup(file != NULL ? file : d->file_conf);
    if (conf == NULL || lb_members_apply(d, conf, err, errlen) != 0) {
        if (conf == NULL)
            snprintf(err, errlen, "out of memory");
        conf_free(conf);
        conf_free(file);
        return -1;
    }

    /* main is the only writer of d->gen and of what lb_gen_new reads */
    ng = lb_gen_new(conf, old, NULL, 0, d->nworkers, &d->next_id, err, errlen);
    if (ng == NULL) {
        conf_free(file);
        return -1;
    }
    pthread_mutex_lock(&d->state_lock);
    rc = lb_gen_decide_reserve(d, ng, old) == 0 ? lb_reload_retire_gen(d, old) : -1;
    pthread_mutex_unlock(&d->state_lock);
    if (rc == -1) {
        snprintf(err, errlen, "out of memory");
        lb_gen_unref(ng);
        conf_free(file);
        return -1;
    }
    if (lb_health_start(d, ng, err, errlen) == -1) {
        pthread_mutex_lock(&d->state_lock);
        d->reload->fig.nretired--;                  /* old stays current */
        pthread_mutex_unlock(&d->state_lock);
        lb_gen_unref(ng);
        conf_free(file);
        return -1;
    }

    /* Commit: from here on nothing fails. */
    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; i < ng->nservers; i++) {
        struct lb_server *srv = ng->servers[i];

        /* changed thresholds apply from the next probe */
        srv->b->health.rise = srv->pool->conf->rise ? srv->pool->conf->rise : 1;
        srv->b->health.fall = srv->pool->conf->fall ? srv->pool->conf->fall : 1;
        run->added += !srv->b->is_decided;
    }
    lb_members_weigh_gen(d, ng);
    run->removed = lb_gen_decide(d, ng, old, true, &run->warm_held);
    if (run->warm_held > 0) {
        run->old = old;
        lb_gen_ref(old);
    }
    d->gen = ng;                        /* main's reference moves over */
    lb_tier_publish(d);                 /* /ready on the new pools */
    lb_log_set_level(ng->conf->global.log_level);
    atomic_store(&d->limit.max, ng->conf->global.max_connections);
    pthread_mutex_unlock(&d->state_lock);
    if (file != NULL) {
        conf_free(d->file_conf);
        d->file_conf = file;
        lb_members_sync(d, file);       /* the discovery keys may have changed */
    }
    return 0;
}

/* Step 5: every worker gets the generation with a reference of its own. */
static void
lb_reload_publish(struct lb_daemon *d, struct lb_reload_run *run)
{
    for (size_t i = 0; i < d->nworkers; i++) {
        lb_gen_ref(d->gen);
        if (lb_worker_post(&d->workers[i], LB_WORKER_SWITCH, d->gen) == -1) {
            lb_gen_unref(d->gen);
            lb_log(CONF_LOG_ERROR, "reload_worker_failed",
                   "worker=%zu error=\"out of memory\" detail=\"it keeps the old config until the next reload\"",
                   i);
            run->switched++;
        }
    }
}

/* A file reload failed: the admin API's member changes it carried are not
 * the file's to refuse. They were written to the members already, so a
 * members reload (the last good file's config) applies them next and
 * answers them, before those asked since; otherwise they would be
 * answered the file's errors and still appear at the next good reload. */
static void
lb_reload_members_again(struct lb_daemon *d, struct lb_reload_run *run)
{
    struct lb_reload_waiters *asked = &d->reload->asked_members;

    if (run->members_waiters.n == 0 || lb_tier_is_stopping(d))
        return;
    for (size_t i = 0; i < asked->n; i++)
        (void)lb_reload_wait(d, &run->members_waiters, asked->list[i].done, asked->list[i].arg);
    free(asked->list);
    *asked = run->members_waiters;
    run->members_waiters = (struct lb_reload_waiters){ 0 };
    if (!d->reload->is_reload_again)
        d->reload->reload_again_trigger = "api";
    d->reload->is_reload_again = true;
}

/* Commits the reload run is for, or fails it, or waits for the file to
 * settle (settle_ev calls again). */
static void
lb_reload_attempt(struct lb_daemon *d, struct lb_reload_run *run)
{
    char err[1024] = "";
    uint64_t retry_ms = 0;
    int rc = lb_reload_commit(d, err, sizeof(err), run, &retry_ms);

    if (rc == 1 && lb_mono_ms() - run->started_ms + retry_ms <= LB_RELOAD_QUIET_MAX_MS) {
        struct timeval tv = lb_tv_ms(retry_ms);

        d->reload->reload_run = run;            /* a request meanwhile comes after */
        event_add(d->reload->settle_ev, &tv);
        return;
    }
    if (rc != 0) {
        d->reload->reload_run = NULL;
        if (run->is_file)
            lb_reload_members_again(d, run);
        lb_reload_end(d, run->trigger, -1, err, run);
        free(run);
        lb_reload_next(d);
        return;
    }
    run->number = d->gen->number;
    d->reload->reload_run = run;
    if (run->old != NULL) {
        lb_reload_warm_start(d, run);
        return;
    }
    lb_reload_publish(d, run);
    lb_reload_finish_if_switched(d);    /* no worker to wait for */
}

static void
lb_reload_on_settle(evutil_socket_t fd, short what, void *arg)
{
    struct lb_daemon *d = arg;

    lb_reload_attempt(d, d->reload->reload_run);
}

static void
lb_reload_start(struct lb_daemon *d, const char *trigger, bool is_file)
{
    struct lb_reload_run *run = calloc(1, sizeof(*run));
    struct lb_reload_run failed = { .trigger = trigger, .is_file = is_file };
    struct lb_reload_run *r = run != NULL ? run : &failed;

    /* A SIGHUP taken before this reload reads the file is covered by it:
     * one whose hup_ev still waits to run would only make another. */
    if (is_file && d->reload->hup_ev != NULL)
        event_del(d->reload->hup_ev);
    if (is_file)
        lb_reload_notify(true);
    *r = (struct lb_reload_run){ .trigger = trigger, .is_file = is_file,
                                 .started_ms = lb_mono_ms() };
    /* It answers every request asked so far: POST /reload if it reads the
     * file, the members changes either way (both kinds apply them). */
    if (is_file) {
        r->file_waiters = d->reload->asked_file;
        d->reload->asked_file = (struct lb_reload_waiters){ 0 };
    }
    r->members_waiters = d->reload->asked_members;
    d->reload->asked_members = (struct lb_reload_waiters){ 0 };
    if (run == NULL) {
        lb_reload_end(d, trigger, -1, "out of memory", &failed);
        return;
    }
    lb_reload_attempt(d, run);
}

/* The reload asked while one ran: one that reads the file if any of
 * those asked did (it applies the members too). */
static void
lb_reload_next(struct lb_daemon *d)
{
    bool is_file = d->reload->is_reload_again_file;

    if (!d->reload->is_reload_again)
        return;
    d->reload->is_reload_again = d->reload->is_reload_again_file = false;
    lb_reload_start(d, d->reload->reload_again_trigger, is_file);
}

/* ------------------------------------------------------------- warming */

static uint64_t
lb_reload_warm_bound_ms(const struct lb_gen *g)
{
    uint64_t ms = 0;

    for (size_t i = 0; i < g->conf->npools; i++) {
        const struct conf_pool *pc = &g->conf->pools[i];

        if (pc->check != CONF_CHECK_NONE && pc->check_timeout_ms > ms)
            ms = pc->check_timeout_ms;
    }
    ms += LB_RELOAD_WARM_SLACK_MS;
    return ms < LB_RELOAD_WARM_MAX_MS ? ms : LB_RELOAD_WARM_MAX_MS;
}

static void
lb_reload_warm_start(struct lb_daemon *d, struct lb_reload_run *run)
{
    uint64_t ms = lb_reload_warm_bound_ms(d->gen);
    struct timeval tv = lb_tv_ms(ms);

    lb_log(CONF_LOG_INFO, "reload_warming",
           "generation=%llu held=%zu added=%zu max_ms=%llu",
           (unsigned long long)run->number, run->warm_held, run->added,
           (unsigned long long)ms);
    event_add(d->reload->warm_ev, &tv);
    lb_reload_warm_check(d, false);     /* every first probe may be back */
}

/* Ends the warm-up once no new server waits for its first probe, or at
 * its bound: the workers switch, and once they all have, the removed
 * servers leave rotation and drain (lb_reload_finish_if_switched). In the
 * other order a worker still on the old generation would find its pool
 * empty for the moment its switch takes: a blue/green switch refused a
 * client that way. Main thread, after health verdicts and on the warm
 * timer. */
void
lb_reload_warm_check(struct lb_daemon *d, bool is_bound)
{
    struct lb_reload_run *run = d->reload->reload_run;
    bool is_warming;

    if (run == NULL || run->old == NULL || run->is_warm_over)
        return;
    pthread_mutex_lock(&d->state_lock);
    is_warming = lb_gen_is_warming(d->gen);
    pthread_mutex_unlock(&d->state_lock);
    if (!is_bound && is_warming)
        return;
    event_del(d->reload->warm_ev);
    run->is_warm_over = true;
    run->warm_ms = lb_mono_ms() - run->started_ms;
    lb_reload_publish(d, run);
    lb_reload_finish_if_switched(d);
}

static void
lb_reload_on_warm_bound(evutil_socket_t fd, short what, void *arg)
{
    lb_reload_warm_check(arg, true);
}

static void
lb_reload_ask(struct lb_daemon *d, const char *trigger, bool is_file)
{
    if (d->reload->reload_run != NULL) {
        /* one more after this one; a file reload wins the trigger */
        if (!d->reload->is_reload_again || is_file)
            d->reload->reload_again_trigger = trigger;
        d->reload->is_reload_again = true;
        d->reload->is_reload_again_file |= is_file;
        return;
    }
    lb_reload_start(d, trigger, is_file);
}

void
lb_reload(struct lb_daemon *d, const char *trigger)
{
    lb_reload_ask(d, trigger, true);
}

void
lb_reload_members(struct lb_daemon *d, const char *trigger)
{
    lb_reload_ask(d, trigger, false);
}

/* The reload is done once every worker runs its generation (or could not
 * be told of it): logged, counted, answered, and the next one asked
 * meanwhile starts. */
static void
lb_reload_finish_if_switched(struct lb_daemon *d)
{
    struct lb_reload_run *run = d->reload->reload_run;
    size_t held;

    if (run->switched < d->nworkers)
        return;
    if (run->old != NULL) {             /* a warm-up's end: see there */
        pthread_mutex_lock(&d->state_lock);
        lb_gen_decide(d, d->gen, run->old, false, &held);
        pthread_mutex_unlock(&d->state_lock);
        lb_gen_unref(run->old);
        run->old = NULL;
    }
    d->reload->reload_run = NULL;
    /* Every worker has switched: without open connections the old
     * generation goes now, not at the next cleanup. */
    lb_reload_free_unused(d);
    lb_reload_end(d, run->trigger, 0, "", run);
    free(run);
    lb_reload_next(d);
}

void
lb_reload_on_switched(struct lb_daemon *d, unsigned worker, uint64_t number)
{
    struct lb_reload_run *run = d->reload->reload_run;

    if (run == NULL || number < run->number)
        return;
    run->switched++;
    lb_reload_finish_if_switched(d);
}

/* Tells each waiter of ws the outcome, and empties it. */
static void
lb_reload_answer(struct lb_daemon *d, struct lb_reload_waiters *ws, int rc, const char *msg)
{
    for (size_t i = 0; i < ws->n; i++)
        ws->list[i].done(d, ws->list[i].arg, rc, msg);
    free(ws->list);
    *ws = (struct lb_reload_waiters){ 0 };
}

/* A reload ended: logged, a file reload counted, and the requests it
 * covers answered. */
static void
lb_reload_end(struct lb_daemon *d, const char *trigger, int rc, const char *err,
              struct lb_reload_run *run)
{
    char qbuf[1200];

    if (rc == 0)
        lb_log(CONF_LOG_INFO, "reload", "trigger=%s generation=%llu servers=%zu added=%zu removed=%zu warm_ms=%llu duration_ms=%.1f",
               trigger, (unsigned long long)d->gen->number, d->gen->nservers, run->added,
               run->removed, (unsigned long long)run->warm_ms,
               (double)(lb_mono_ms() - run->started_ms));
    else
        lb_log(CONF_LOG_ERROR, "reload_failed", "trigger=%s error=%s detail=\"the old config keeps serving\"",
               trigger, lb_log_quote(qbuf, sizeof(qbuf), err));
    if (rc == 0 && run->is_file)
        lb_state_save(d);
    if (run->is_file)
        lb_reload_notify(false);
    lb_reload_answer(d, &run->members_waiters, rc, err);
    if (!run->is_file)
        return;
    pthread_mutex_lock(&d->state_lock);
    free(d->reload->fig.reload_error);
    d->reload->fig.reload_error = NULL;
    if (rc == 0) {
        d->reload->fig.reloads_ok++;
    } else {
        d->reload->fig.reloads_failed++;
        d->reload->fig.reload_error = strdup(err);
    }
    pthread_mutex_unlock(&d->state_lock);
    lb_reload_answer(d, &run->file_waiters, rc, err);
}

/* ---------------------------------------------------------------- SIGHUP */

/* libevent runs a signal callback once per signal caught; a burst of
 * SIGHUPs must make one reload, not fifty. The callback only activates
 * hup_ev, and activating an active event does nothing: signals that come
 * before the reload runs end in one reload, which reads the file as it is
 * then; signals while a reload waits for its workers, in one more. */
static void
lb_reload_on_hup(evutil_socket_t fd, short what, void *arg)
{
    lb_reload(arg, "SIGHUP");
}

void
lb_reload_signal(struct lb_daemon *d)
{
    event_active(d->reload->hup_ev, EV_READ, 0);
}

/* --------------------------------------------------------- POST /reload */

/* Keeps done(arg) for the next reload that covers it; out of memory, it
 * is told at once. */
static bool
lb_reload_wait(struct lb_daemon *d, struct lb_reload_waiters *ws, lb_reload_done_pt done,
               void *arg)
{
    if (ws->n == ws->cap) {
        size_t cap = ws->cap ? ws->cap * 2 : 8;
        struct lb_reload_waiter *l = realloc(ws->list, cap * sizeof(*l));

        if (l == NULL) {
            done(d, arg, -1, "out of memory");
            return false;
        }
        ws->list = l;
        ws->cap = cap;
    }
    ws->list[ws->n++] = (struct lb_reload_waiter){ done, arg };
    return true;
}

void
lb_reload_request(struct lb_daemon *d, lb_reload_done_pt done, void *arg)
{
    if (lb_reload_wait(d, &d->reload->asked_file, done, arg))
        lb_reload(d, "admin");
}

void
lb_reload_members_request(struct lb_daemon *d, lb_reload_done_pt done, void *arg)
{
    if (lb_reload_wait(d, &d->reload->asked_members, done, arg))
        lb_reload_members(d, "api");
}

/* ---------------------------------------------------------- old gens */

/* Frees the replaced generations that only main still holds: no worker and
 * no session uses them. The state lock keeps the admin thread out while the
 * list changes. A generation of a large config is megabytes in many small
 * blocks: give them back to the system, or reloads would leave the process
 * as large as the most generations it ever held at once. */
static void
lb_reload_free_unused(struct lb_daemon *d)
{
    size_t kept = 0, freed;

    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; i < d->reload->fig.nretired; i++) {
        struct lb_gen *g = d->reload->fig.retired[i];

        if (atomic_load(&g->refs) == 1)
            lb_gen_unref(g);
        else
            d->reload->fig.retired[kept++] = g;
    }
    freed = d->reload->fig.nretired - kept;
    d->reload->fig.nretired = kept;
    pthread_mutex_unlock(&d->state_lock);
    if (freed > 0)
        malloc_trim(0);
}

static void
lb_reload_on_cleanup(evutil_socket_t fd, short what, void *arg)
{
    lb_reload_free_unused(arg);
}

int
lb_reload_new(struct lb_daemon *d)
{
    return (d->reload = calloc(1, sizeof(*d->reload))) != NULL ? 0 : -1;
}

void
lb_reload_free(struct lb_daemon *d)
{
    if (d->reload == NULL)
        return;
    free(d->reload);
    d->reload = NULL;
}

const struct lb_reload_figures *
lb_reload_figures(const struct lb_daemon *d)
{
    return &d->reload->fig;
}

int
lb_reload_init(struct lb_daemon *d)
{
    struct timeval tv = { 0, LB_RELOAD_CLEANUP_MS * 1000 };

    d->reload->hup_ev = event_new(d->base, -1, 0, lb_reload_on_hup, d);
    d->reload->retired_ev = event_new(d->base, -1, EV_PERSIST, lb_reload_on_cleanup, d);
    d->reload->warm_ev = evtimer_new(d->base, lb_reload_on_warm_bound, d);
    d->reload->settle_ev = evtimer_new(d->base, lb_reload_on_settle, d);
    if (d->reload->hup_ev == NULL || d->reload->retired_ev == NULL || d->reload->warm_ev == NULL ||
        d->reload->settle_ev == NULL ||
        event_add(d->reload->retired_ev, &tv) == -1)
        return -1;
    return 0;
}

void
lb_reload_stop(struct lb_daemon *d)
{
    if (d->reload->reload_run != NULL) {
        lb_reload_answer(d, &d->reload->reload_run->members_waiters, -1, "lb is stopping");
        lb_reload_answer(d, &d->reload->reload_run->file_waiters, -1, "lb is stopping");
    }
    lb_reload_answer(d, &d->reload->asked_members, -1, "lb is stopping");
    lb_reload_answer(d, &d->reload->asked_file, -1, "lb is stopping");
}

void
lb_reload_fini(struct lb_daemon *d)
{
    if (d->reload->retired_ev != NULL)
        event_free(d->reload->retired_ev);
    if (d->reload->hup_ev != NULL)
        event_free(d->reload->hup_ev);
    if (d->reload->warm_ev != NULL)
        event_free(d->reload->warm_ev);
    if (d->reload->settle_ev != NULL)
        event_free(d->reload->settle_ev);
    d->reload->retired_ev = d->reload->hup_ev = d->reload->warm_ev = d->reload->settle_ev = NULL;
    if (d->reload->reload_run != NULL && d->reload->reload_run->old != NULL)
        lb_gen_unref(d->reload->reload_run->old);
    lb_reload_stop(d);                  /* any asked since */
    free(d->reload->reload_run);
    d->reload->reload_run = NULL;
    for (size_t i = 0; i < d->reload->fig.nretired; i++)
        lb_gen_unref(d->reload->fig.retired[i]);
    free(d->reload->fig.retired);
    d->reload->fig.retired = NULL;
    d->reload->fig.nretired = 0;
    free(d->reload->fig.reload_error);
    d->reload->fig.reload_error = NULL;
    conf_free(d->file_conf);
    d->file_conf = NULL;
}
