/*
 * reload.c - SIGHUP and POST /reload: move to a new config without dropping
 * a connection and without forgetting what the health checks know.
 *
 *   1. Parse and validate the whole file. Bad: nothing changes.
 *   2. Build the new generation next to the old one. Kept servers share
 *      their state (struct lb_backend), kept addresses their sockets, so
 *      nothing is copied and nothing is lost; new addresses are bound now,
 *      and a bind error fails the reload before anything changed.
 *   3. Move the health checks to the new server set (a bad CA file fails
 *      here, still before anything changed).
 *   4. Commit under state_lock: swap the generation, retire removed servers
 *      (they drain with their pool's drain_timeout), recompute rotation.
 *   5. Hand the generation to every worker and wait until each has switched;
 *      the old generation lives on in its sessions and is freed by the
 *      first cleanup after its last one ends.
 *
 * Main thread. A reload runs to its end in one callback; SIGHUPs that come
 * meanwhile coalesce into one more reload (lb_reload_signal).
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "lb.h"

/* How long main waits for the workers to take a new generation. They do it
 * on their next loop pass; this only bounds a pathological case. */
#define LB_RELOAD_WORKER_WAIT_MS 5000
/* How often replaced generations are checked for their last session. */
#define LB_RELOAD_CLEANUP_MS 500

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
}

/* A server of old that the new generation does not have. */
static bool
lb_reload_is_removed(const struct lb_gen *ng, const struct lb_server *srv)
{
    uint32_t id = srv->b->id;

    return id >= ng->nby_id || ng->by_id[id] == NULL || ng->by_id[id]->b != srv->b;
}

static int
lb_reload_retire_gen(struct lb_daemon *d, struct lb_gen *old)
{
    struct lb_gen **r = realloc(d->retired, (d->nretired + 1) * sizeof(*r));

    if (r == NULL)
        return -1;
    d->retired = r;
    d->retired[d->nretired++] = old;
    return 0;
}

/* Every worker gets the new generation with a reference of its own; main
 * waits until each has switched, so that two reloads never overlap in a
 * worker. */
static void
lb_reload_publish(struct lb_daemon *d, struct lb_gen *ng)
{
    struct timespec pause = { 0, 1000000 };
    int waited = 0;

    for (size_t i = 0; i < d->nworkers; i++) {
        struct lb_gen *prev;

        lb_gen_ref(ng);
        prev = atomic_exchange(&d->workers[i].pending_gen, ng);
        if (prev != NULL)
            lb_gen_unref(prev);
        lb_worker_notify(&d->workers[i]);
    }
    for (size_t i = 0; i < d->nworkers; i++) {
        while (atomic_load(&d->workers[i].gen_number) < ng->number &&
               waited < LB_RELOAD_WORKER_WAIT_MS) {
            nanosleep(&pause, NULL);
            waited++;
        }
    }
    if (waited >= LB_RELOAD_WORKER_WAIT_MS)
        lb_log(CONF_LOG_ERROR, "reload_slow_worker", "generation=%llu detail=\"a worker has not switched yet\"",
               (unsigned long long)ng->number);
}

static void lb_reload_free_unused(struct lb_daemon *d);

static int
lb_reload_run(struct lb_daemon *d, char *err, size_t errlen, size_t *added, size_t *removed)
{
    struct lb_gen *old = d->gen, *ng;
    struct conf *conf = NULL;
    char *errors = NULL;

    if (d->shutdown_timer_ev != NULL) {
        snprintf(err, errlen, "shutting down");
        return -1;
    }
    if (conf_load(d->path, &conf, &errors) == -1) {
        size_t n;

        snprintf(err, errlen, "%s", errors != NULL ? errors : "out of memory");
        n = strlen(err);
        while (n > 0 && err[n - 1] == '\n')
            err[--n] = '\0';
        free(errors);
        return -1;
    }
    lb_reload_keep_restart_settings(old->conf, conf);

    pthread_mutex_lock(&d->state_lock);
    ng = lb_gen_new(conf, old, d->nworkers, &d->next_id, err, errlen);
    if (ng == NULL) {
        pthread_mutex_unlock(&d->state_lock);
        return -1;
    }
    if (lb_reload_retire_gen(d, old) == -1) {
        snprintf(err, errlen, "out of memory");
        lb_gen_unref(ng);
        pthread_mutex_unlock(&d->state_lock);
        return -1;
    }
    if (lb_health_start(d, ng, err, errlen) == -1) {
        d->nretired--;                  /* old stays current */
        lb_gen_unref(ng);
        pthread_mutex_unlock(&d->state_lock);
        return -1;
    }

    /* Commit: from here on nothing fails. */
    for (size_t i = 0; i < ng->nservers; i++) {
        struct lb_server *srv = ng->servers[i];

        /* changed thresholds apply from the next probe */
        srv->b->health.rise = srv->pool->conf->rise ? srv->pool->conf->rise : 1;
        srv->b->health.fall = srv->pool->conf->fall ? srv->pool->conf->fall : 1;
        *added += srv->b->id >= old->nby_id || old->by_id[srv->b->id] == NULL;
    }
    for (size_t i = 0; i < old->nservers; i++) {
        if (lb_reload_is_removed(ng, old->servers[i])) {
            lb_server_retire(d, old->servers[i]);
            (*removed)++;
        }
    }
    d->gen = ng;                        /* main's reference moves over */
    for (size_t i = 0; i < ng->conf->npools; i++)
        lb_pool_update(d, &ng->pools[i], "reload");
    lb_log_set_level(ng->conf->global.log_level);
    atomic_store(&d->limit.max, ng->conf->global.max_connections);
    pthread_mutex_unlock(&d->state_lock);

    lb_reload_publish(d, ng);
    /* Every worker has switched: without open connections the old
     * generation goes now, not at the next cleanup. */
    lb_reload_free_unused(d);
    return 0;
}

int
lb_reload(struct lb_daemon *d, const char *trigger)
{
    char err[1024] = "", qbuf[1200];
    size_t added = 0, removed = 0;
    struct timespec t0, t1;
    double ms;
    int rc;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = lb_reload_run(d, err, sizeof(err), &added, &removed);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;

    pthread_mutex_lock(&d->state_lock);
    free(d->reload_error);
    d->reload_error = NULL;
    if (rc == 0) {
        d->reloads_ok++;
    } else {
        d->reloads_failed++;
        d->reload_error = strdup(err);
    }
    pthread_mutex_unlock(&d->state_lock);

    if (rc == 0)
        lb_log(CONF_LOG_INFO, "reload", "trigger=%s generation=%llu servers=%zu added=%zu removed=%zu duration_ms=%.1f",
               trigger, (unsigned long long)d->gen->number, d->gen->nservers, added, removed, ms);
    else
        lb_log(CONF_LOG_ERROR, "reload_failed", "trigger=%s error=%s detail=\"the old config keeps serving\"",
               trigger, lb_log_quote(qbuf, sizeof(qbuf), err));

    pthread_mutex_lock(&d->reload_lock);
    d->reload_status = rc;
    snprintf(d->reload_message, sizeof(d->reload_message), "%s", rc == 0 ? "" : err);
    pthread_mutex_unlock(&d->reload_lock);
    return rc;
}

/* ---------------------------------------------------------------- SIGHUP */

/* libevent runs a signal callback once per signal caught; a burst of
 * SIGHUPs must make one reload, not fifty. The callback only activates
 * hup_ev, and activating an active event does nothing: signals that come
 * before the reload runs, or while it runs, end in exactly one reload after
 * it, which reads the file as it is then. */
static void
lb_reload_on_hup(evutil_socket_t fd, short what, void *arg)
{
    lb_reload(arg, "SIGHUP");
}

void
lb_reload_signal(struct lb_daemon *d)
{
    event_active(d->hup_ev, EV_READ, 0);
}

/* --------------------------------------------------------- POST /reload */

static void
lb_reload_on_request(evutil_socket_t fd, short what, void *arg)
{
    struct lb_daemon *d = arg;
    uint64_t ticket;

    pthread_mutex_lock(&d->reload_lock);
    ticket = d->reload_asked;       /* every request asked so far */
    pthread_mutex_unlock(&d->reload_lock);
    lb_reload(d, "admin");
    pthread_mutex_lock(&d->reload_lock);
    d->reload_done = ticket;
    pthread_cond_broadcast(&d->reload_cond);
    pthread_mutex_unlock(&d->reload_lock);
}

int
lb_reload_request(struct lb_daemon *d, char *msg, size_t len)
{
    struct timespec deadline;
    uint64_t ticket;
    int rc = -1;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 30;
    pthread_mutex_lock(&d->reload_lock);
    ticket = ++d->reload_asked;
    pthread_mutex_unlock(&d->reload_lock);
    event_active(d->reload_ev, EV_READ, 0);

    pthread_mutex_lock(&d->reload_lock);
    while (d->reload_done < ticket) {
        if (pthread_cond_timedwait(&d->reload_cond, &d->reload_lock, &deadline) != 0)
            break;
    }
    if (d->reload_done >= ticket) {
        rc = d->reload_status;
        snprintf(msg, len, "%s", d->reload_message);
    } else {
        snprintf(msg, len, "reload did not finish in 30 s");
    }
    pthread_mutex_unlock(&d->reload_lock);
    return rc;
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
    for (size_t i = 0; i < d->nretired; i++) {
        struct lb_gen *g = d->retired[i];

        if (atomic_load(&g->refs) == 1)
            lb_gen_unref(g);
        else
            d->retired[kept++] = g;
    }
    freed = d->nretired - kept;
    d->nretired = kept;
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
lb_reload_init(struct lb_daemon *d)
{
    struct timeval tv = { 0, LB_RELOAD_CLEANUP_MS * 1000 };

    pthread_mutex_init(&d->reload_lock, NULL);
    pthread_cond_init(&d->reload_cond, NULL);
    d->reload_ev = event_new(d->base, -1, 0, lb_reload_on_request, d);
    d->hup_ev = event_new(d->base, -1, 0, lb_reload_on_hup, d);
    d->retired_ev = event_new(d->base, -1, EV_PERSIST, lb_reload_on_cleanup, d);
    if (d->reload_ev == NULL || d->hup_ev == NULL || d->retired_ev == NULL ||
        event_add(d->retired_ev, &tv) == -1)
        return -1;
    return 0;
}

void
lb_reload_fini(struct lb_daemon *d)
{
    if (d->reload_ev != NULL)
        event_free(d->reload_ev);
    if (d->retired_ev != NULL)
        event_free(d->retired_ev);
    if (d->hup_ev != NULL)
        event_free(d->hup_ev);
    d->reload_ev = d->retired_ev = d->hup_ev = NULL;
    for (size_t i = 0; i < d->nretired; i++)
        lb_gen_unref(d->retired[i]);
    free(d->retired);
    d->retired = NULL;
    d->nretired = 0;
    free(d->reload_error);
    d->reload_error = NULL;
}
