/*
 * hist.c - fixed-bucket histograms in milliseconds (exported in seconds by
 * /metrics): struct lb_hist for one thread or under a lock, struct
 * lb_ahist for the workers, observed without a lock.
 */
#include "core.h"

const double lb_hist_bounds_ms[LB_HIST_BUCKETS] = {
    1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
};

void
lb_ahist_observe(struct lb_ahist *h, uint64_t us)
{
    for (size_t i = 0; i < LB_HIST_BUCKETS; i++) {
        if ((double)us <= lb_hist_bounds_ms[i] * 1000) {
            atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
            break;
        }
    }
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
}

void
lb_ahist_read(const struct lb_ahist *h, struct lb_hist *out)
{
    uint64_t in_buckets = 0;

    for (size_t i = 0; i < LB_HIST_BUCKETS; i++) {
        out->buckets[i] = atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
        in_buckets += out->buckets[i];
    }
    /* An observation counted in its bucket but not yet in count would
     * make the +Inf bucket smaller than the last finite one. */
    out->count = atomic_load_explicit(&h->count, memory_order_relaxed);
    if (out->count < in_buckets)
        out->count = in_buckets;
    out->sum_ms = (double)atomic_load_explicit(&h->sum_us, memory_order_relaxed) / 1000.0;
}

void
lb_hist_observe(struct lb_hist *h, double ms)
{
    for (size_t i = 0; i < LB_HIST_BUCKETS; i++) {
        if (ms <= lb_hist_bounds_ms[i]) {
            h->buckets[i]++;
            break;
        }
    }
    h->count++;         /* above the last bound: only in +Inf (= count) */
    h->sum_ms += ms;
}
