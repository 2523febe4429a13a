/* Tests lb/core/hist.c: an observation lands in the first bucket whose
 * bound it does not exceed (Prometheus' "le"), one above the last bound
 * only in the count (+Inf), and the lock-free histogram of the workers
 * reads back as the plain one. */
#include <stdint.h>

#include "check.h"
#include "core.h"

static size_t
bucket_of(const struct lb_hist *h)
{
    for (size_t i = 0; i < LB_HIST_BUCKETS; i++) {
        if (h->buckets[i] != 0)
            return i;
    }
    return LB_HIST_BUCKETS;            /* none: only in +Inf */
}

/* One value on each side of every bound. */
static void
test_bounds(void)
{
    for (size_t i = 0; i < LB_HIST_BUCKETS; i++) {
        struct lb_hist at = { 0 }, above = { 0 };
        double bound = lb_hist_bounds_ms[i];

        lb_hist_observe(&at, bound);
        lb_hist_observe(&above, bound * 1.001);
        CHECK_EQ_INT(bucket_of(&at), i);
        CHECK_EQ_INT(bucket_of(&above), i + 1);
        CHECK_EQ_INT(at.count, 1);
        CHECK_EQ_INT(above.count, 1);
    }
    for (size_t i = 1; i < LB_HIST_BUCKETS; i++)
        CHECK(lb_hist_bounds_ms[i - 1] < lb_hist_bounds_ms[i]);
}

static void
test_sum_and_count(void)
{
    struct lb_hist h = { 0 };
    uint64_t in_buckets = 0;

    lb_hist_observe(&h, 0);
    lb_hist_observe(&h, 3);
    lb_hist_observe(&h, 3);
    lb_hist_observe(&h, 1e6);          /* past the last bound */
    for (size_t i = 0; i < LB_HIST_BUCKETS; i++)
        in_buckets += h.buckets[i];
    CHECK_EQ_INT(h.count, 4);
    CHECK_EQ_INT(in_buckets, 3);
    CHECK_EQ_INT(h.buckets[0], 1);     /* 0 <= 1 ms */
    CHECK_EQ_INT(h.buckets[2], 2);     /* 2.5 < 3 <= 5 ms */
    CHECK(h.sum_ms == 1e6 + 6);
}

/* The workers' histogram takes microseconds: 2500 us is 2.5 ms, at the
 * bound; 2501 us is past it. */
static void
test_atomic(void)
{
    struct lb_ahist ah = { 0 };
    struct lb_hist h = { 0 };

    lb_ahist_observe(&ah, 2500);
    lb_ahist_observe(&ah, 2501);
    lb_ahist_observe(&ah, 120000000);  /* 120 s: only in +Inf */
    lb_ahist_read(&ah, &h);
    CHECK_EQ_INT(h.count, 3);
    CHECK_EQ_INT(h.buckets[1], 1);
    CHECK_EQ_INT(h.buckets[2], 1);
    CHECK(h.sum_ms == (2500 + 2501 + 120000000) / 1000.0);
}

int
main(void)
{
    test_bounds();
    test_sum_and_count();
    test_atomic();
    return CHECK_DONE();
}
