/*
 * hc_int.h - what the health module's files share; other modules use hc.h.
 */
#ifndef HC_INT_H
#define HC_INT_H

#include <pthread.h>

#include <openssl/ssl.h>

#include "hc.h"

/* The longest PROXY header a check sends: v2 LOCAL (16 bytes) or v1
 * "PROXY UNKNOWN\r\n" (15), with no TLVs. */
#define HC_PROXY_MAX 16

struct event;
struct event_base;
struct hc_probe;

/* One server's check: created on the main thread (hc_add, hc_update), then
 * owned by its health thread (timer, probe in flight, sequence). */
struct hc_target {
    struct hc_thread *thread;       /* threads[id % nthreads], for life */
    struct hc_spec spec;            /* strings owned (strdup) */
    char sni[256];                  /* spec.host without port; "" for an IP */
    char request[512];              /* the HTTP request, built once */
    size_t request_len;
    uint8_t proxy[HC_PROXY_MAX];    /* check_send_proxy: the PROXY header
                                       every new connection starts with */
    size_t proxy_len;               /* 0: none */
    SSL_CTX *ssl_ctx;               /* HTTPS: shared, one reference */
    struct event *timer;
    uint64_t planned_ms;            /* monotonic plan of the next probe */
    uint64_t seq;
    struct hc_probe *probe;         /* in flight, or NULL */
    int kept_fd;                    /* check_reuse: the last probe's
                                       connection, or -1 */
    struct ssl_st *kept_ssl;        /* ... and its TLS, or NULL */
    uint64_t skipped;               /* slots lost to a probe still running */
};

/* One health thread. Everything but the mailbox belongs to the thread once
 * it runs; before hc_start the main thread fills it. */
struct hc_thread {
    struct hc *hc;
    unsigned index;
    pthread_t thread;
    bool is_running;
    struct event_base *base;
    struct lb_mailbox *mailbox;     /* struct hc_msg from other threads */
    struct hc_target **targets;     /* the thread's list */
    size_t ntargets, cap;
    struct hc_target **by_slot;     /* by id / nthreads, for probe-now */
    size_t nslots;
    uint64_t rng;                   /* the schedule's spread (splitmix64) */
    struct hc_result *results;      /* finished, not posted yet */
    size_t nresults, results_cap;
    struct event *flush_ev;         /* posts them, HC_FLUSH_MS after the first */
};

/* probe.c: starts one probe of tg (health thread). On any outcome it calls
 * hc_probe_done(), which frees the probe and clears tg->probe. */
void hc_probe_start(struct hc_target *tg, double lag_ms);
void hc_probe_cancel(struct hc_probe *p);     /* stop: no result */
/* At a slot of p's target: ends p as its own timeout would when that
 * timeout, counted from the slot p started for, has come by now (within
 * HC_TIMER_EARLY_MS), and returns true; else false. With check_timeout =
 * check_interval (the default of an interval of 1s or less) the two timers
 * fall due together, and whichever libevent ran first decided whether the
 * slot was skipped: a hung server was probed every other slot, and found
 * down a whole (fall - 1) intervals late. */
bool hc_probe_end_if_due(struct hc_probe *p, uint64_t now);
/* libevent's timers run on CLOCK_MONOTONIC_COARSE: one fires up to a kernel
 * tick (4 ms at HZ=250, 10 ms at HZ=100) off the precise clock. */
#define HC_TIMER_EARLY_MS 10
void hc_probe_unkeep(struct hc_target *tg);   /* closes a kept connection */

/* hc_pool.c: queues a result for main's mailbox. Health thread. */
void hc_result_push(struct hc_thread *th, const struct hc_result *r);

#endif /* HC_INT_H */
