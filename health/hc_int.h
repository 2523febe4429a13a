/*
 * hc_int.h - what the health module's files share; other modules use hc.h.
 */
#ifndef HC_INT_H
#define HC_INT_H

#include <pthread.h>

#include <openssl/ssl.h>

#include "hc.h"

struct event;
struct event_base;
struct hc_probe;

/* One server's check: created by hc_add on the main thread, then owned by
 * its health thread (timer, probe in flight, sequence). */
struct hc_target {
    struct hc_thread *thread;
    struct hc_spec spec;            /* strings owned (strdup) */
    char sni[256];                  /* spec.host without port; "" for an IP */
    char request[512];              /* the HTTP request, built once */
    size_t request_len;
    SSL_CTX *ssl_ctx;               /* HTTPS: shared, one reference */
    struct event *timer;
    uint64_t planned_ms;            /* monotonic plan of the next probe */
    uint64_t seq;
    struct hc_probe *probe;         /* in flight, or NULL */
    uint64_t skipped;               /* slots lost to a probe still running */
    bool is_adopted;                /* on its thread's list (thread only) */
};

struct hc_thread {
    struct hc *hc;
    pthread_t thread;
    bool is_running;
    struct event_base *base;
    struct hc_target **targets;
    size_t ntargets, cap;

    /* out-of-schedule requests from other threads (hc_probe_now) */
    pthread_mutex_t now_lock;
    uint32_t *now_ids;
    size_t nnow, capnow;
    struct event *now_ev;
    struct event *stop_ev;              /* hc_free ends the loop with it */

    /* hc_update's changes for this thread, under now_lock */
    struct hc_op {
        struct hc_target *tg;           /* to adopt, NULL for a removal */
        struct hc_target *old;          /* it replaces / to remove */
    } *ops;
    size_t nops, capops;
    struct event *ops_ev;
};

uint64_t hc_now_ms(void);

/* probe.c: starts one probe of tg (health thread). On any outcome it calls
 * hc_probe_done(), which frees the probe and clears tg->probe. */
void hc_probe_start(struct hc_target *tg, double lag_ms);
void hc_probe_cancel(struct hc_probe *p);     /* stop: no result */

/* hc_pool.c: queues a result for the main thread. Health thread. */
void hc_result_push(struct hc *hc, const struct hc_result *r);

#endif /* HC_INT_H */
