/*
 * hc_pool.c - the health module: its threads, the schedule of every target,
 * and the messages that reach them.
 *
 * A target belongs to thread id % nthreads for its whole life, so that any
 * thread can address a message about it without a shared map. The main
 * thread keeps its own map of the targets it created (by_id, main only);
 * each health thread keeps the targets it runs (its list and by_slot).
 * Everything between threads goes through mailboxes (lb/core/core.h): ops
 * and probe-now requests to each health thread, results to the caller.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <openssl/err.h>

#include "core.h"
#include "dgram.h"
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
    bool is_started;
    struct hc_tls *tls;             /* main thread */
    struct lb_mailbox *results;     /* the caller's: struct hc_result */
    struct hc_target **by_id;       /* main thread: the targets it made */
    size_t nby_id;
};

/* What other threads ask of a health thread, in the order asked. */
enum hc_msg_kind {
    HC_MSG_ADOPT = 0,               /* run tg (replacing old, if any) */
    HC_MSG_REMOVE,                  /* stop and free old */
    HC_MSG_PROBE_NOW,               /* probe target id out of schedule */
    HC_MSG_STOP,                    /* end the loop (hc_free) */
};

struct hc_msg {
    enum hc_msg_kind kind;
    uint32_t id;
    struct hc_target *tg;           /* ADOPT: owned by the message */
    struct hc_target *old;          /* ADOPT, REMOVE: on the thread's list */
};

static void hc_target_on_timer(evutil_socket_t fd, short what, void *arg);
static void hc_thread_on_msgs(void *msgs, size_t n, void *arg);
static void hc_thread_flush(evutil_socket_t fd, short what, void *arg);
static void hc_target_arm(struct hc_target *tg, uint64_t now);

struct hc *
hc_new(unsigned threads, struct lb_mailbox *results, char *err, size_t errlen)
{
    struct hc *hc = calloc(1, sizeof(*hc));

    if (hc == NULL || threads == 0) {
        free(hc);
        snprintf(err, errlen, threads == 0 ? "no health threads" : "out of memory");
        return NULL;
    }
    hc->nthreads = threads;
    hc->results = results;
    hc->threads = calloc(threads, sizeof(*hc->threads));
    if (hc->threads == NULL) {
        snprintf(err, errlen, "out of memory");
        hc_free(hc);
        return NULL;
    }
    for (unsigned i = 0; i < threads; i++) {
        struct hc_thread *th = &hc->threads[i];

        th->hc = hc;
        th->index = i;
        /* No time cache: libevent would otherwise arm every timer of a
         * busy loop pass against the time the pass began, so a probe
         * started late in a pass would time out early by as much, and the
         * next slot would be planned early. A health thread arms a timer or
         * two per probe: the clock reads are cheap next to the connect. */
        th->base = lb_base_new(EVENT_BASE_FLAG_NO_CACHE_TIME);
        if (th->base != NULL) {
            th->mailbox = lb_mailbox_new(th->base, sizeof(struct hc_msg), hc_thread_on_msgs, th);
            th->flush_ev = evtimer_new(th->base, hc_thread_flush, th);
        }
        if (th->base == NULL || th->mailbox == NULL || th->flush_ev == NULL) {
            snprintf(err, errlen, "event_base_new failed");
            hc_free(hc);
            return NULL;
        }
    }
    return hc;
}

static struct hc_thread *
hc_thread_of(struct hc *hc, uint32_t id)
{
    return &hc->threads[id % hc->nthreads];
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
    hc_probe_unkeep(tg);
    if (tg->timer != NULL)
        event_free(tg->timer);
    free((char *)tg->spec.host);
    free((char *)tg->spec.path);
    free((char *)tg->spec.ca);
    free((char *)tg->spec.user);
    free((char *)tg->spec.database);
    free((char *)tg->spec.grpc_service);
    free((char *)tg->spec.dns_name);
    free((uint8_t *)tg->spec.send);
    free((uint8_t *)tg->spec.expect_bytes);
    free(tg);
}

/* check_send_proxy: the header of lb's own connections (v1 UNKNOWN, v2
 * LOCAL: the spec's command for health checks), built once. */
static int
hc_target_proxy(struct hc_target *tg, char *err, size_t errlen)
{
    uint8_t buf[LB_PROXY_BUILD_MAX];
    size_t n;

    if (tg->spec.send_proxy != CONF_PROXY_V1 && tg->spec.send_proxy != CONF_PROXY_V2)
        return 0;
    n = lb_proxy_build(buf, tg->spec.send_proxy, NULL, NULL, NULL);
    if (n == 0 || n > sizeof(tg->proxy)) {
        snprintf(err, errlen, "internal error: PROXY header of %zu bytes", n);
        return -1;
    }
    memcpy(tg->proxy, buf, n);
    tg->proxy_len = n;
    return 0;
}

/* A dns target's query must be one lb can write: conf/ refuses the names
 * it cannot, so this is a bound kept, not a check users meet. */
static int
hc_target_dgram_check(const struct hc_target *tg, char *err, size_t errlen)
{
    struct hc_dgram d;

    if (tg->spec.kind != CONF_CHECK_DNS && tg->spec.kind != CONF_CHECK_UDP)
        return 0;
    if (hc_dgram_begin(&d, &tg->spec, 0) == 0)
        return 0;
    snprintf(err, errlen, "check_dns_name %s: no DNS query can ask it", tg->spec.dns_name);
    return -1;
}

/* A copy of len bytes (malloc'd; one byte when len is 0, so that NULL
 * means out of memory), as strdup for strings. */
static uint8_t *
hc_memdup(const uint8_t *b, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);

    if (copy != NULL && len > 0)
        memcpy(copy, b, len);
    return copy;
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
    tg->kept_fd = -1;
    tg->spec = *spec;
    tg->spec.host = strdup(spec->host);
    tg->spec.path = strdup(spec->path);
    tg->spec.ca = strdup(spec->ca);
    tg->spec.user = strdup(spec->user);
    tg->spec.database = strdup(spec->database);
    tg->spec.grpc_service = strdup(spec->grpc_service != NULL ? spec->grpc_service : "");
    tg->spec.dns_name = strdup(spec->dns_name != NULL ? spec->dns_name : ".");
    tg->spec.send = hc_memdup(spec->send, spec->send_len);
    tg->spec.expect_bytes = hc_memdup(spec->expect_bytes, spec->expect_bytes_len);
    tg->timer = evtimer_new(th->base, hc_target_on_timer, tg);
    if (tg->spec.host == NULL || tg->spec.path == NULL || tg->spec.ca == NULL ||
        tg->spec.user == NULL || tg->spec.database == NULL || tg->spec.dns_name == NULL ||
        tg->spec.grpc_service == NULL ||
        tg->spec.send == NULL || tg->spec.expect_bytes == NULL || tg->timer == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (hc_target_dgram_check(tg, err, errlen) == -1)
        goto fail;
    hc_target_sni(tg);
    n = snprintf(tg->request, sizeof(tg->request),
                 "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: %s\r\n"
                 "User-Agent: lb-health\r\nAccept: */*\r\n\r\n",
                 tg->spec.path, tg->spec.host, spec->reuse ? "keep-alive" : "close");
    if (n < 0 || (size_t)n >= sizeof(tg->request)) {
        snprintf(err, errlen, "check request too long");
        goto fail;
    }
    tg->request_len = (size_t)n;
    if (hc_target_proxy(tg, err, errlen) == -1)
        goto fail;
    if (spec->kind == CONF_CHECK_HTTPS || (spec->kind == CONF_CHECK_GRPC && spec->tls)) {
        tg->ssl_ctx = hc_tls_get(hc, spec->verify, spec->ca, err, errlen);
        if (tg->ssl_ctx == NULL)
            goto fail;
    }
    return tg;
fail:
    hc_target_free(tg);
    return NULL;
}

/* The thread's own lists: a target it runs is on targets[] and in
 * by_slot[id / nthreads]. Thread only (or main before start). */
static int
hc_thread_adopt(struct hc_thread *th, struct hc_target *tg)
{
    size_t slot = tg->spec.id / th->hc->nthreads;

    if (th->ntargets == th->cap) {
        size_t cap = th->cap ? th->cap * 2 : 16;
        struct hc_target **t = realloc(th->targets, cap * sizeof(*t));
        if (t == NULL)
            return -1;
        th->targets = t;
        th->cap = cap;
    }
    if (slot >= th->nslots) {
        size_t n = slot + 1 > th->nslots * 2 ? slot + 1 : th->nslots * 2;
        struct hc_target **b = realloc(th->by_slot, n * sizeof(*b));
        if (b == NULL)
            return -1;
        memset(b + th->nslots, 0, (n - th->nslots) * sizeof(*b));
        th->by_slot = b;
        th->nslots = n;
    }
    th->targets[th->ntargets++] = tg;
    th->by_slot[slot] = tg;
    return 0;
}

static void
hc_thread_forget(struct hc_thread *th, struct hc_target *tg)
{
    size_t slot = tg->spec.id / th->hc->nthreads;

    for (size_t i = 0; i < th->ntargets; i++) {
        if (th->targets[i] == tg) {
            th->targets[i] = th->targets[--th->ntargets];
            break;
        }
    }
    if (slot < th->nslots && th->by_slot[slot] == tg)
        th->by_slot[slot] = NULL;
    hc_target_free(tg);
}

/* Makes by_id hold at least n entries. Main thread. */
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
    struct hc_thread *th = hc_thread_of(hc, spec->id);
    struct hc_target *tg = hc_target_new(hc, th, spec, err, errlen);

    if (tg == NULL)
        return -1;
    if (hc_map_reserve(hc, (size_t)spec->id + 1) == -1 || hc_thread_adopt(th, tg) == -1) {
        snprintf(err, errlen, "out of memory");
        hc_target_free(tg);
        return -1;
    }
    hc->by_id[spec->id] = tg;
    return 0;
}

/* ---------------------------------------------------------------- update */

static void
hc_thread_apply_adopt(struct hc_thread *th, struct hc_target *tg, struct hc_target *old,
                      uint64_t now)
{
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
    if (hc_thread_adopt(th, tg) == -1) {
        hc_target_free(tg);                 /* out of memory: unchecked */
        return;
    }
    hc_target_arm(tg, now);
}

static void
hc_thread_on_msgs(void *msgs, size_t n, void *arg)
{
    struct hc_thread *th = arg;
    const struct hc_msg *m = msgs;
    uint64_t now = lb_mono_ms();

    for (size_t i = 0; i < n; i++) {
        size_t slot = m[i].id / th->hc->nthreads;
        struct hc_target *tg;

        switch (m[i].kind) {
        case HC_MSG_ADOPT:
            hc_thread_apply_adopt(th, m[i].tg, m[i].old, now);
            break;
        case HC_MSG_REMOVE:
            hc_thread_forget(th, m[i].old);
            break;
        case HC_MSG_PROBE_NOW:
            /* One in flight answers soon anyway. */
            tg = slot < th->nslots ? th->by_slot[slot] : NULL;
            if (tg != NULL && tg->spec.id == m[i].id && tg->probe == NULL)
                hc_probe_start(tg, 0.0);
            break;
        case HC_MSG_STOP:
            event_base_loopbreak(th->base);
            break;
        }
    }
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
     * reload) before anything changed. */
    for (size_t i = 0; ok && i < n; i++) {
        built[i] = hc_target_new(hc, hc_thread_of(hc, specs[i].id), &specs[i], err, errlen);
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

    for (size_t i = 0; i < n; i++)
        map[specs[i].id] = built[i];
    /* A post fails only when out of memory; the target then goes on with
     * its old settings (or unchecked, if new) until the next reload. */
    for (size_t id = 0; id < hc->nby_id; id++) {
        struct hc_target *old = hc->by_id[id];
        struct hc_msg m = { .kind = HC_MSG_REMOVE, .id = (uint32_t)id, .old = old };

        if (old == NULL)
            continue;
        if (id < nmap && map[id] != NULL) {
            m.kind = HC_MSG_ADOPT;
            m.tg = map[id];
        }
        if (lb_mailbox_post(old->thread->mailbox, &m) == -1 && m.tg != NULL) {
            hc_target_free(m.tg);
            map[id] = old;
        }
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t id = specs[i].id;
        struct hc_msg m = { .kind = HC_MSG_ADOPT, .id = id, .tg = built[i] };

        if ((id >= hc->nby_id || hc->by_id[id] == NULL) &&
            lb_mailbox_post(built[i]->thread->mailbox, &m) == -1) {
            hc_target_free(built[i]);
            map[id] = NULL;
        }
    }
    free(hc->by_id);
    hc->by_id = map;
    hc->nby_id = nmap;
    free(built);
    return 0;
}

/* ------------------------------------------------------------ scheduling */

uint64_t
hc_sched_next(uint64_t planned, uint64_t now, uint64_t interval, uint64_t seq,
              uint64_t rnd)
{
    if (interval == 0)
        interval = 1;
    /* The plan moves by whole intervals from the previous plan, so a slow
     * loop or a slow probe does not stretch the period. Servers are all
     * probed at once at start; the first period is then shortened by a
     * random part of the interval, so that from the second probe on the
     * servers of a large pool are spread evenly over the interval (as
     * haproxy spreads its first checks) and keep that phase. */
    if (seq <= 1 && interval >= 2)
        planned += 1 + rnd % interval;
    else
        planned += interval;
    if (planned <= now)             /* fell behind by more than a period */
        planned += ((now - planned) / interval + 1) * interval;
    return planned;
}

static void
hc_target_arm(struct hc_target *tg, uint64_t now)
{
    struct timeval tv = lb_tv_ms(tg->planned_ms > now ? tg->planned_ms - now : 0);

    evtimer_add(tg->timer, &tv);
}

/* splitmix64: each health thread has its own state (rand() would share one
 * between threads). */
static uint64_t
hc_thread_random(struct hc_thread *th)
{
    uint64_t z = (th->rng += UINT64_C(0x9e3779b97f4a7c15));

    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void
hc_target_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct hc_target *tg = arg;
    uint64_t now = lb_mono_ms();
    double lag = now > tg->planned_ms ? (double)(now - tg->planned_ms) : 0.0;

    if (tg->probe == NULL || hc_probe_end_if_due(tg->probe, now))
        hc_probe_start(tg, lag);
    else
        tg->skipped++;              /* never two probes of one server */
    tg->planned_ms = hc_sched_next(tg->planned_ms, now, tg->spec.interval_ms, tg->seq,
                                   hc_thread_random(tg->thread));
    hc_target_arm(tg, now);
}

void
hc_probe_now(struct hc *hc, uint32_t id)
{
    struct hc_msg m = { .kind = HC_MSG_PROBE_NOW, .id = id };

    /* A lost request (out of memory) only waits for the schedule. */
    (void)lb_mailbox_post(hc_thread_of(hc, id)->mailbox, &m);
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
    uint64_t now = lb_mono_ms();

    for (unsigned i = 0; i < hc->nthreads; i++) {
        struct hc_thread *th = &hc->threads[i];

        th->rng = now * 0x100000001b3ull + i;
        /* Probed at once: a fresh start learns every server's state in
         * one round. A server whose state is known (handed over by the
         * process this one replaces) keeps a probe a period, at a random
         * point of its first one: the new process must not probe the
         * whole pool in one burst. */
        for (size_t k = 0; k < th->ntargets; k++) {
            struct hc_target *tg = th->targets[k];
            uint64_t interval = tg->spec.interval_ms ? tg->spec.interval_ms : 1;

            tg->planned_ms = now + (tg->spec.is_known ? hc_thread_random(th) % interval : 0);
            hc_target_arm(tg, now);
        }
        if (pthread_create(&th->thread, NULL, hc_thread_main, th) != 0)
            return -1;
        th->is_running = true;
    }
    hc->is_started = true;
    return 0;
}

/* ---------------------------------------------------------------- results */

/* Results leave a health thread in batches, HC_FLUSH_MS after the first of
 * a batch: one lock and at most one wake-up of main per batch. Posted one
 * by one, at 10,000 checks a second, the posts took 11% of the thread
 * (the mutex handed between threads, an eventfd write each) and woke main
 * 10,000 times; a verdict is late by at most this much. */
#define HC_FLUSH_MS 2

static void
hc_thread_flush(evutil_socket_t fd, short what, void *arg)
{
    struct hc_thread *th = arg;

    /* Out of memory: these results are lost; the next probes report. */
    (void)lb_mailbox_post_n(th->hc->results, th->results, th->nresults);
    th->nresults = 0;
}

void
hc_result_push(struct hc_thread *th, const struct hc_result *r)
{
    if (th->nresults == th->results_cap) {
        size_t cap = th->results_cap ? th->results_cap * 2 : 64;
        struct hc_result *a = realloc(th->results, cap * sizeof(*a));

        if (a == NULL) {
            (void)lb_mailbox_post(th->hc->results, r);
            return;
        }
        th->results = a;
        th->results_cap = cap;
    }
    th->results[th->nresults++] = *r;
    if (th->nresults == 1) {
        struct timeval tv = lb_tv_ms(HC_FLUSH_MS);

        if (evtimer_add(th->flush_ev, &tv) == -1)
            hc_thread_flush(-1, 0, th);
    }
}

/* Ops never applied: their new targets are ours to free. */
static void
hc_thread_drop_msgs(void *msgs, size_t n, void *arg)
{
    const struct hc_msg *m = msgs;

    for (size_t i = 0; i < n; i++) {
        if (m[i].kind == HC_MSG_ADOPT)
            hc_target_free(m[i].tg);
    }
}

void
hc_free(struct hc *hc)
{
    if (hc == NULL)
        return;
    for (unsigned i = 0; hc->threads != NULL && i < hc->nthreads; i++) {
        struct hc_thread *th = &hc->threads[i];
        struct hc_msg stop = { .kind = HC_MSG_STOP };

        /* Through a message, not event_base_loopbreak(): a loop that has
         * not started yet clears the break flag when it starts. */
        if (th->is_running) {
            if (lb_mailbox_post(th->mailbox, &stop) == -1)
                event_base_loopbreak(th->base);     /* it runs: it sees it */
            pthread_join(th->thread, NULL);
        }
    }
    for (unsigned i = 0; hc->threads != NULL && i < hc->nthreads; i++) {
        struct hc_thread *th = &hc->threads[i];
        lb_mailbox_free(th->mailbox, hc_thread_drop_msgs, th);
        for (size_t k = 0; k < th->ntargets; k++)
            hc_target_free(th->targets[k]);
        free(th->targets);
        free(th->by_slot);
        free(th->results);
        if (th->flush_ev != NULL)
            event_free(th->flush_ev);
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
    free(hc);
}
