/*
 * hc_pool.c - the health module: its threads, the schedule of every target,
 * and the queue that hands results to the main thread.
 *
 * Targets are spread round robin over the threads when added; from
 * hc_start on, a target belongs to its thread alone. The only state shared
 * between threads is the result queue (a mutex-protected array swapped out
 * whole by hc_take_results) and the notify callback.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <openssl/err.h>

#include "hc_int.h"

/* SSL contexts are shared by the targets with the same verify settings:
 * building one per server would cost a CA load each for 10,000 servers. */
struct hc_tls {
    struct hc_tls *next;
    bool verify;
    char *ca;
    SSL_CTX *ctx;
};

struct hc {
    struct hc_thread *threads;
    unsigned nthreads;
    unsigned next_thread;           /* round robin for hc_add */
    bool is_started;
    struct hc_tls *tls;             /* main thread, before start */
    hc_notify_pt notify;
    void *notify_arg;
    pthread_mutex_t map_lock;       /* guards by_id: main replaces it on
                                       update, workers and health threads
                                       read it */
    struct hc_target **by_id;
    size_t nby_id;

    pthread_mutex_t lock;           /* guards the queue below */
    struct hc_result *queue;
    size_t nqueue, capqueue;
};

static void hc_target_on_timer(evutil_socket_t fd, short what, void *arg);
static void hc_thread_on_now(evutil_socket_t fd, short what, void *arg);
static void hc_thread_on_stop(evutil_socket_t fd, short what, void *arg);
static void hc_thread_on_ops(evutil_socket_t fd, short what, void *arg);
static void hc_target_arm(struct hc_target *tg, uint64_t now);

uint64_t
hc_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* No time cache: libevent would otherwise arm every timer of a busy loop
 * pass against the time the pass began, so a probe started late in a pass
 * would time out early by as much, and the next slot would be planned early.
 * A health thread arms a timer or two per probe: the clock reads are cheap
 * next to the connect. */
static struct event_base *
hc_base_new(void)
{
    struct event_config *cfg = event_config_new();
    struct event_base *base;

    if (cfg == NULL)
        return NULL;
    event_config_set_flag(cfg, EVENT_BASE_FLAG_NO_CACHE_TIME);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return base;
}

struct hc *
hc_new(unsigned threads, hc_notify_pt notify, void *notify_arg, char *err,
       size_t errlen)
{
    struct hc *hc = calloc(1, sizeof(*hc));

    if (hc == NULL || threads == 0) {
        free(hc);
        snprintf(err, errlen, threads == 0 ? "no health threads" : "out of memory");
        return NULL;
    }
    hc->nthreads = threads;
    hc->notify = notify;
    hc->notify_arg = notify_arg;
    pthread_mutex_init(&hc->lock, NULL);
    pthread_mutex_init(&hc->map_lock, NULL);
    hc->threads = calloc(threads, sizeof(*hc->threads));
    if (hc->threads == NULL) {
        snprintf(err, errlen, "out of memory");
        hc_free(hc);
        return NULL;
    }
    for (unsigned i = 0; i < threads; i++) {
        hc->threads[i].hc = hc;
        pthread_mutex_init(&hc->threads[i].now_lock, NULL);
        hc->threads[i].base = hc_base_new();
        if (hc->threads[i].base != NULL) {
            hc->threads[i].now_ev = event_new(hc->threads[i].base, -1, 0, hc_thread_on_now,
                                              &hc->threads[i]);
            hc->threads[i].stop_ev = event_new(hc->threads[i].base, -1, 0, hc_thread_on_stop,
                                               &hc->threads[i]);
            hc->threads[i].ops_ev = event_new(hc->threads[i].base, -1, 0, hc_thread_on_ops,
                                              &hc->threads[i]);
        }
        if (hc->threads[i].base == NULL || hc->threads[i].now_ev == NULL ||
            hc->threads[i].stop_ev == NULL || hc->threads[i].ops_ev == NULL) {
            snprintf(err, errlen, "event_base_new failed");
            hc_free(hc);
            return NULL;
        }
    }
    return hc;
}

static SSL_CTX *
hc_tls_get(struct hc *hc, bool verify, const char *ca, char *err, size_t errlen)
{
    struct hc_tls *t;
    SSL_CTX *ctx;

    for (t = hc->tls; t != NULL; t = t->next) {
        if (t->verify == verify && strcmp(t->ca, ca) == 0)
            return t->ctx;
    }
    ctx = SSL_CTX_new(TLS_client_method());
    t = calloc(1, sizeof(*t));
    if (ctx == NULL || t == NULL || (t->ca = strdup(ca)) == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (verify) {
        int ok = ca[0] != '\0' ? SSL_CTX_load_verify_locations(ctx, ca, NULL)
                               : SSL_CTX_set_default_verify_paths(ctx);
        if (ok != 1) {
            unsigned long e = ERR_get_error();
            ERR_clear_error();
            snprintf(err, errlen, "check_ca %s: cannot load: %s", ca[0] ? ca : "(system default)",
                     ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "unknown error");
            goto fail;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    } else {
        /* Off by default, as in haproxy's "check-ssl verify none" use:
         * most backends serve self-signed certificates. */
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    t->verify = verify;
    t->ctx = ctx;
    t->next = hc->tls;
    hc->tls = t;
    return ctx;
fail:
    SSL_CTX_free(ctx);
    if (t != NULL)
        free(t->ca);
    free(t);
    return NULL;
}

/* sni: the host without its port, empty for an IP literal (RFC 6066 does
 * not allow addresses in SNI). */
static void
hc_target_sni(struct hc_target *tg)
{
    const char *h = tg->spec.host;
    unsigned char tmp[sizeof(struct in6_addr)];
    size_t len;

    if (h[0] == '[') {                      /* [v6]:port */
        tg->sni[0] = '\0';
        return;
    }
    len = strcspn(h, ":");
    if (len >= sizeof(tg->sni))
        len = sizeof(tg->sni) - 1;
    memcpy(tg->sni, h, len);
    tg->sni[len] = '\0';
    if (inet_pton(AF_INET, tg->sni, tmp) == 1)
        tg->sni[0] = '\0';
}

static void
hc_target_free(struct hc_target *tg)
{
    if (tg == NULL)
        return;
    if (tg->probe != NULL)
        hc_probe_cancel(tg->probe);
    if (tg->timer != NULL)
        event_free(tg->timer);
    free((char *)tg->spec.host);
    free((char *)tg->spec.path);
    free((char *)tg->spec.ca);
    free(tg);
}

/* Builds a target for thread th (not yet on its list). Main thread. */
static struct hc_target *
hc_target_new(struct hc *hc, struct hc_thread *th, const struct hc_spec *spec,
              char *err, size_t errlen)
{
    struct hc_target *tg = calloc(1, sizeof(*tg));
    int n;

    if (tg == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    tg->thread = th;
    tg->spec = *spec;
    tg->spec.host = strdup(spec->host);
    tg->spec.path = strdup(spec->path);
    tg->spec.ca = strdup(spec->ca);
    tg->timer = evtimer_new(th->base, hc_target_on_timer, tg);
    if (tg->spec.host == NULL || tg->spec.path == NULL || tg->spec.ca == NULL ||
        tg->timer == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    hc_target_sni(tg);
    n = snprintf(tg->request, sizeof(tg->request),
                 "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                 "User-Agent: lb-health\r\nAccept: */*\r\n\r\n",
                 tg->spec.path, tg->spec.host);
    if (n < 0 || (size_t)n >= sizeof(tg->request)) {
        snprintf(err, errlen, "check request too long");
        goto fail;
    }
    tg->request_len = (size_t)n;
    if (spec->kind == CONF_CHECK_HTTPS) {
        tg->ssl_ctx = hc_tls_get(hc, spec->verify, spec->ca, err, errlen);
        if (tg->ssl_ctx == NULL)
            goto fail;
    }
    return tg;
fail:
    hc_target_free(tg);
    return NULL;
}

static int
hc_thread_append(struct hc_thread *th, struct hc_target *tg)
{
    if (th->ntargets == th->cap) {
        size_t cap = th->cap ? th->cap * 2 : 16;
        struct hc_target **t = realloc(th->targets, cap * sizeof(*t));
        if (t == NULL)
            return -1;
        th->targets = t;
        th->cap = cap;
    }
    th->targets[th->ntargets++] = tg;
    tg->is_adopted = true;
    return 0;
}

static void
hc_thread_forget(struct hc_thread *th, struct hc_target *tg)
{
    for (size_t i = 0; i < th->ntargets; i++) {
        if (th->targets[i] == tg) {
            th->targets[i] = th->targets[--th->ntargets];
            break;
        }
    }
    hc_target_free(tg);
}

/* Makes by_id hold at least n entries. Caller holds map_lock or is the
 * only thread (before start). */
static int
hc_map_reserve(struct hc *hc, size_t n)
{
    struct hc_target **b;
    size_t nb;

    if (n <= hc->nby_id)
        return 0;
    nb = n > hc->nby_id * 2 ? n : hc->nby_id * 2;
    b = realloc(hc->by_id, nb * sizeof(*b));
    if (b == NULL)
        return -1;
    memset(b + hc->nby_id, 0, (nb - hc->nby_id) * sizeof(*b));
    hc->by_id = b;
    hc->nby_id = nb;
    return 0;
}

int
hc_add(struct hc *hc, const struct hc_spec *spec, char *err, size_t errlen)
{
    struct hc_thread *th = &hc->threads[hc->next_thread];
    struct hc_target *tg = hc_target_new(hc, th, spec, err, errlen);

    if (tg == NULL)
        return -1;
    if (hc_map_reserve(hc, (size_t)spec->id + 1) == -1 || hc_thread_append(th, tg) == -1) {
        snprintf(err, errlen, "out of memory");
        hc_target_free(tg);
        return -1;
    }
    hc->by_id[spec->id] = tg;
    hc->next_thread = (hc->next_thread + 1) % hc->nthreads;
    return 0;
}

/* ---------------------------------------------------------------- update */

/* Queues an op for a health thread; it applies it on its own loop. */
static int
hc_thread_post(struct hc_thread *th, struct hc_target *tg, struct hc_target *old)
{
    bool was_empty;

    pthread_mutex_lock(&th->now_lock);
    if (th->nops == th->capops) {
        size_t cap = th->capops ? th->capops * 2 : 64;
        struct hc_op *ops = realloc(th->ops, cap * sizeof(*ops));
        if (ops == NULL) {
            pthread_mutex_unlock(&th->now_lock);
            return -1;
        }
        th->ops = ops;
        th->capops = cap;
    }
    was_empty = th->nops == 0;
    th->ops[th->nops++] = (struct hc_op){ .tg = tg, .old = old };
    pthread_mutex_unlock(&th->now_lock);
    if (was_empty)
        event_active(th->ops_ev, EV_READ, 0);
    return 0;
}

static void
hc_thread_on_ops(evutil_socket_t fd, short what, void *arg)
{
    struct hc_thread *th = arg;
    uint64_t now = hc_now_ms();
    struct hc_op *ops;
    size_t n;

    pthread_mutex_lock(&th->now_lock);
    ops = th->ops;
    n = th->nops;
    th->ops = NULL;
    th->nops = th->capops = 0;
    pthread_mutex_unlock(&th->now_lock);
    for (size_t i = 0; i < n; i++) {
        struct hc_target *tg = ops[i].tg, *old = ops[i].old;

        if (tg == NULL) {                       /* removal */
            hc_thread_forget(th, old);
            continue;
        }
        if (old != NULL) {
            /* Same server, new settings: keep its schedule and sequence
             * (results are ordered by it); a probe in flight on the old
             * settings is dropped. */
            tg->planned_ms = old->planned_ms;
            tg->seq = old->seq;
            hc_thread_forget(th, old);
        } else {
            tg->planned_ms = now;               /* a new server: probe now */
        }
        if (hc_thread_append(th, tg) == -1) {
            hc_target_free(tg);                 /* out of memory: unchecked */
            continue;
        }
        hc_target_arm(tg, now);
    }
    free(ops);
}

int
hc_update(struct hc *hc, const struct hc_spec *specs, size_t n, char *err, size_t errlen)
{
    struct hc_target **built = calloc(n ? n : 1, sizeof(*built));
    struct hc_target **map = NULL;
    size_t nmap = 0;
    bool ok = true;

    if (built == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        nmap = specs[i].id + 1 > nmap ? specs[i].id + 1 : nmap;
    map = calloc(nmap ? nmap : 1, sizeof(*map));
    ok = map != NULL;
    /* Build everything first: a bad CA file fails the update (and the
     * reload) before anything changed. A server keeps its thread. */
    for (size_t i = 0; ok && i < n; i++) {
        struct hc_target *old = specs[i].id < hc->nby_id ? hc->by_id[specs[i].id] : NULL;
        struct hc_thread *th = old != NULL ? old->thread : &hc->threads[hc->next_thread];

        if (old == NULL)
            hc->next_thread = (hc->next_thread + 1) % hc->nthreads;
        built[i] = hc_target_new(hc, th, &specs[i], err, errlen);
        ok = built[i] != NULL;
    }
    if (!ok) {
        if (map == NULL)
            snprintf(err, errlen, "out of memory");
        for (size_t i = 0; i < n; i++)
            hc_target_free(built[i]);
        free(built);
        free(map);
        return -1;
    }

    pthread_mutex_lock(&hc->map_lock);
    for (size_t i = 0; i < n; i++)
        map[specs[i].id] = built[i];
    for (size_t id = 0; id < hc->nby_id; id++) {
        struct hc_target *old = hc->by_id[id];

        if (old == NULL)
            continue;
        if (id < nmap && map[id] != NULL)
            hc_thread_post(old->thread, map[id], old);
        else
            hc_thread_post(old->thread, NULL, old);
    }
    for (size_t i = 0; i < n; i++) {
        if (specs[i].id >= hc->nby_id || hc->by_id[specs[i].id] == NULL)
            hc_thread_post(built[i]->thread, built[i], NULL);
    }
    free(hc->by_id);
    hc->by_id = map;
    hc->nby_id = nmap;
    pthread_mutex_unlock(&hc->map_lock);
    free(built);
    return 0;
}

/* ------------------------------------------------------------ scheduling */

static void
hc_target_arm(struct hc_target *tg, uint64_t now)
{
    uint64_t delay = tg->planned_ms > now ? tg->planned_ms - now : 0;
    struct timeval tv = { .tv_sec = (time_t)(delay / 1000),
                          .tv_usec = (suseconds_t)(delay % 1000) * 1000 };

    evtimer_add(tg->timer, &tv);
}

static void
hc_target_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct hc_target *tg = arg;
    uint64_t interval = tg->spec.interval_ms;
    uint64_t now = hc_now_ms();
    double lag = now > tg->planned_ms ? (double)(now - tg->planned_ms) : 0.0;

    if (tg->probe == NULL)
        hc_probe_start(tg, lag);
    else
        tg->skipped++;              /* never two probes of one server */

    /* The plan moves by whole intervals from the previous plan, so a slow
     * loop or a slow probe does not stretch the period. Servers are all
     * probed at once at start; the first period is then shortened by a
     * random part of the interval, so that from the second probe on the
     * servers of a large pool are spread evenly over the interval (as
     * haproxy spreads its first checks) and keep that phase. */
    if (tg->seq <= 1 && interval >= 2)
        tg->planned_ms += 1 + (uint64_t)rand() % interval;
    else
        tg->planned_ms += interval;
    if (tg->planned_ms <= now)      /* fell behind by more than a period */
        tg->planned_ms += ((now - tg->planned_ms) / interval + 1) * interval;
    hc_target_arm(tg, now);
}

void
hc_probe_now(struct hc *hc, uint32_t id)
{
    struct hc_thread *th = NULL;
    bool was_empty;

    pthread_mutex_lock(&hc->map_lock);
    if (id < hc->nby_id && hc->by_id[id] != NULL)
        th = hc->by_id[id]->thread;     /* threads live as long as hc */
    pthread_mutex_unlock(&hc->map_lock);
    if (th == NULL)
        return;
    pthread_mutex_lock(&th->now_lock);
    if (th->nnow == th->capnow) {
        size_t cap = th->capnow ? th->capnow * 2 : 16;
        uint32_t *ids = realloc(th->now_ids, cap * sizeof(*ids));
        if (ids == NULL) {
            pthread_mutex_unlock(&th->now_lock);
            return;             /* the regular schedule still probes it */
        }
        th->now_ids = ids;
        th->capnow = cap;
    }
    was_empty = th->nnow == 0;
    th->now_ids[th->nnow++] = id;
    pthread_mutex_unlock(&th->now_lock);
    if (was_empty)
        event_active(th->now_ev, EV_READ, 0);
}

static void
hc_thread_on_now(evutil_socket_t fd, short what, void *arg)
{
    struct hc_thread *th = arg;
    uint32_t *ids;
    size_t n;

    pthread_mutex_lock(&th->now_lock);
    ids = th->now_ids;
    n = th->nnow;
    th->now_ids = NULL;
    th->nnow = th->capnow = 0;
    pthread_mutex_unlock(&th->now_lock);
    for (size_t i = 0; i < n; i++) {
        struct hc_target *tg;

        pthread_mutex_lock(&th->hc->map_lock);
        tg = ids[i] < th->hc->nby_id ? th->hc->by_id[ids[i]] : NULL;
        pthread_mutex_unlock(&th->hc->map_lock);
        /* Only a target this thread already runs (an update may have
         * replaced it with one not adopted yet); one in flight answers
         * soon anyway. */
        if (tg != NULL && tg->thread == th && tg->is_adopted && tg->probe == NULL)
            hc_probe_start(tg, 0.0);
    }
    free(ids);
}

static void
hc_thread_on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct hc_thread *th = arg;

    event_base_loopbreak(th->base);
}

static void *
hc_thread_main(void *arg)
{
    struct hc_thread *th = arg;

    /* Named so that top, perf and /proc/PID/task show the health threads'
     * own CPU use apart from the workers'. */
    pthread_setname_np(pthread_self(), "lb-health");
    event_base_loop(th->base, EVLOOP_NO_EXIT_ON_EMPTY);
    /* OpenSSL keeps per-thread state (the error queue). */
    OPENSSL_thread_stop();
    return NULL;
}

int
hc_start(struct hc *hc)
{
    uint64_t now = hc_now_ms();

    srand((unsigned)now);
    for (unsigned i = 0; i < hc->nthreads; i++) {
        struct hc_thread *th = &hc->threads[i];

        /* Probed at once: a fresh start learns every server's state in
         * one round. */
        for (size_t k = 0; k < th->ntargets; k++) {
            th->targets[k]->planned_ms = now;
            hc_target_arm(th->targets[k], now);
        }
        if (pthread_create(&th->thread, NULL, hc_thread_main, th) != 0)
            return -1;
        th->is_running = true;
    }
    hc->is_started = true;
    return 0;
}

/* ---------------------------------------------------------------- results */

void
hc_result_push(struct hc *hc, const struct hc_result *r)
{
    bool was_empty;

    pthread_mutex_lock(&hc->lock);
    if (hc->nqueue == hc->capqueue) {
        size_t cap = hc->capqueue ? hc->capqueue * 2 : 64;
        struct hc_result *q = realloc(hc->queue, cap * sizeof(*q));
        if (q == NULL) {
            /* Out of memory: drop this result; the next probe reports. */
            pthread_mutex_unlock(&hc->lock);
            return;
        }
        hc->queue = q;
        hc->capqueue = cap;
    }
    was_empty = hc->nqueue == 0;
    hc->queue[hc->nqueue++] = *r;
    pthread_mutex_unlock(&hc->lock);
    /* Wake the consumer only on the empty -> non-empty edge: it takes the
     * whole queue at once. */
    if (was_empty && hc->notify != NULL)
        hc->notify(hc->notify_arg);
}

size_t
hc_take_results(struct hc *hc, struct hc_result **out)
{
    size_t n;

    pthread_mutex_lock(&hc->lock);
    *out = hc->queue;
    n = hc->nqueue;
    hc->queue = NULL;
    hc->nqueue = hc->capqueue = 0;
    pthread_mutex_unlock(&hc->lock);
    return n;
}

void
hc_free(struct hc *hc)
{
    if (hc == NULL)
        return;
    for (unsigned i = 0; hc->threads != NULL && i < hc->nthreads; i++) {
        struct hc_thread *th = &hc->threads[i];

        if (th->is_running) {
            /* Through an event, not event_base_loopbreak(): a loop that
             * has not started yet clears the break flag when it starts. */
            event_active(th->stop_ev, EV_READ, 0);
            pthread_join(th->thread, NULL);
        }
        if (th->stop_ev != NULL)
            event_free(th->stop_ev);
        if (th->ops_ev != NULL)
            event_free(th->ops_ev);
        /* ops never applied: their new targets are ours to free */
        for (size_t k = 0; k < th->nops; k++)
            hc_target_free(th->ops[k].tg);
        free(th->ops);
        for (size_t k = 0; k < th->ntargets; k++)
            hc_target_free(th->targets[k]);
        free(th->targets);
        if (th->now_ev != NULL)
            event_free(th->now_ev);
        free(th->now_ids);
        pthread_mutex_destroy(&th->now_lock);
        if (th->base != NULL)
            event_base_free(th->base);
    }
    free(hc->threads);
    free(hc->by_id);
    while (hc->tls != NULL) {
        struct hc_tls *t = hc->tls;
        hc->tls = t->next;
        SSL_CTX_free(t->ctx);
        free(t->ca);
        free(t);
    }
    free(hc->queue);
    pthread_mutex_destroy(&hc->lock);
    pthread_mutex_destroy(&hc->map_lock);
    free(hc);
}
