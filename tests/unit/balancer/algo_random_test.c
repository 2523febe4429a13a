/*
 * algo_random_test.c - tests balancer/algo_random.c: power of two weighted
 * random choices.
 */
#include <stdint.h>

#include "algo_fixture.h"

static struct bal_pool *pool(size_t n, const uint32_t *w)
{
    return algo_pool(BAL_ALGO_RANDOM, n, w);
}

static void test_load(void)
{
    static const uint32_t w[] = {1, 1, 1, 1};
    static const uint32_t w2[] = {1, 3};
    struct bal_pool *p = pool(4, w);
    struct bal_cursor *c = bal_cursor_new(p, 7);
    int count[4] = {0};

    /* The busiest of all is always the loser of its draw. */
    algo_set_active(p, 0, 10);
    algo_count_picks(p, c, 10000, NULL, 0, false, count);
    CHECK_EQ_INT(count[0], 0);
    CHECK(count[1] > 3000 && count[2] > 3000 && count[3] > 3000);

    /* a and b are picked only when drawn together: 1 in 6, shared. */
    algo_set_active(p, 1, 10);
    count[0] = count[1] = count[2] = count[3] = 0;
    algo_count_picks(p, c, 12000, NULL, 0, false, count);
    CHECK(count[0] + count[1] > 1500 && count[0] + count[1] < 2500);
    CHECK(count[2] > 4500 && count[3] > 4500);

    /* Per weight: 3/1 > 6/3, then 3/1 < 12/3. */
    bal_pool_free(p);
    bal_cursor_free(c);
    p = pool(2, w2);
    c = bal_cursor_new(p, 7);
    algo_set_active(p, 0, 3);
    algo_set_active(p, 1, 6);
    for (int k = 0; k < 100; k++)
        CHECK_EQ_INT(bal_pick(p, c, 0, NULL, 0), 1);
    algo_set_active(p, 1, 12);
    for (int k = 0; k < 100; k++)
        CHECK_EQ_INT(bal_pick(p, c, 0, NULL, 0), 0);
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Connections that never end stay evenly spread: two choices keep the
 * spread far below what plain random gives (about 100 here). */
static void test_balance(void)
{
    static const uint32_t w[] = {1, 1, 1, 1};
    struct bal_pool *p = pool(4, w);
    struct bal_cursor *c = bal_cursor_new(p, 3);
    uint32_t lo = UINT32_MAX, hi = 0;

    for (int k = 0; k < 10000; k++) {
        int i = bal_pick(p, c, 0, NULL, 0);

        if (i >= 0)
            bal_server_conn_start(p, (size_t)i);
    }
    for (size_t i = 0; i < 4; i++) {
        uint32_t a = bal_server_active(p, i);

        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    CHECK(hi - lo <= 10);
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* The seed gives each worker its own stream. */
static void test_seed(void)
{
    static const uint32_t w[] = {1, 1, 1, 1};
    struct bal_pool *p = pool(4, w);
    struct bal_cursor *a = bal_cursor_new(p, 1);
    struct bal_cursor *b = bal_cursor_new(p, 1);
    struct bal_cursor *d = bal_cursor_new(p, 2);
    int same_seed = 0, other_seed = 0;

    for (int k = 0; k < 100; k++) {
        int x = bal_pick(p, a, 0, NULL, 0);

        same_seed += x == bal_pick(p, b, 0, NULL, 0);
        other_seed += x == bal_pick(p, d, 0, NULL, 0);
    }
    CHECK_EQ_INT(same_seed, 100);
    CHECK(other_seed < 60);
    bal_cursor_free(a);
    bal_cursor_free(b);
    bal_cursor_free(d);
    bal_pool_free(p);
}

int main(void)
{
    test_load();
    test_balance();
    test_seed();
    return CHECK_DONE();
}
