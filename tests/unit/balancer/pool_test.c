/*
 * pool_test.c - tests balancer/pool.c: building pools and cursors, rotation
 * and connection accounting, bal_pick()'s guards and bal_hash_bytes(),
 * connection caps, the attempt order of retries and their pauses.
 */
#include <stdint.h>
#include <string.h>

#include "bal.h"
#include "check.h"

static const char *const names[] = {"web1", "web2", "web3", "web4"};

static void test_empty_pool(void)
{
    static const enum bal_algo algos[] = {
        BAL_ALGO_ROUNDROBIN, BAL_ALGO_LEASTCONN, BAL_ALGO_SOURCE,
        BAL_ALGO_RANDOM,
    };

    for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
        struct bal_pool *p = bal_pool_new(algos[a], 0, NULL, NULL);
        struct bal_cursor *c;

        CHECK(p != NULL);
        if (p == NULL)
            continue;
        CHECK_EQ_INT(p->nservers, 0);
        c = bal_cursor_new(p, 7);
        CHECK(c != NULL);
        if (c != NULL)
            CHECK_EQ_INT(bal_pick(p, c, 42, NULL, 0), -1);
        bal_cursor_free(c);
        bal_pool_free(p);
    }
}

static void test_new_state(void)
{
    static const uint32_t w[] = {3, 1, 0, 7};
    struct bal_pool *p = bal_pool_new(BAL_ALGO_LEASTCONN, 4, w, names);

    CHECK(p != NULL);
    if (p == NULL)
        return;
    CHECK_EQ_INT(p->algo, BAL_ALGO_LEASTCONN);
    CHECK_EQ_INT(p->nservers, 4);
    for (size_t i = 0; i < 4; i++) {
        CHECK(bal_server_in_rotation(p, i));
        CHECK_EQ_INT(bal_server_active(p, i), 0);
        CHECK(p->servers[i].id_hash ==
              bal_hash_bytes(names[i], strlen(names[i])));
    }
    CHECK_EQ_INT(p->servers[0].weight, 3);
    CHECK_EQ_INT(p->servers[3].weight, 7);
    /* Weight 0 is out of contract; it is clamped so random cannot divide
     * by a zero total. */
    CHECK_EQ_INT(p->servers[2].weight, 1);
    bal_pool_free(p);
    bal_pool_free(NULL);
    bal_cursor_free(NULL);
}

static void test_accounting(void)
{
    static const uint32_t w[] = {1, 1};
    struct bal_pool *p = bal_pool_new(BAL_ALGO_ROUNDROBIN, 2, w, names);

    CHECK(p != NULL);
    if (p == NULL)
        return;
    bal_server_conn_start(p, 1);
    bal_server_conn_start(p, 1);
    bal_server_conn_start(p, 0);
    CHECK_EQ_INT(bal_server_active(p, 0), 1);
    CHECK_EQ_INT(bal_server_active(p, 1), 2);
    bal_server_conn_end(p, 1);
    CHECK_EQ_INT(bal_server_active(p, 1), 1);
    bal_server_conn_end(p, 1);
    bal_server_conn_end(p, 0);
    CHECK_EQ_INT(bal_server_active(p, 0), 0);
    CHECK_EQ_INT(bal_server_active(p, 1), 0);

    bal_server_set_in_rotation(p, 0, false);
    CHECK(!bal_server_in_rotation(p, 0));
    CHECK(bal_server_in_rotation(p, 1));
    bal_server_set_in_rotation(p, 0, true);
    CHECK(bal_server_in_rotation(p, 0));
    bal_pool_free(p);
}

/* A cursor indexes per-server arrays sized for its own pool. */
static void test_cursor_of_other_pool(void)
{
    static const uint32_t w[] = {1, 1, 1, 1};
    struct bal_pool *small = bal_pool_new(BAL_ALGO_ROUNDROBIN, 2, w, names);
    struct bal_pool *big = bal_pool_new(BAL_ALGO_ROUNDROBIN, 4, w, names);
    struct bal_cursor *c = small ? bal_cursor_new(small, 0) : NULL;

    CHECK(small != NULL && big != NULL && c != NULL);
    if (small != NULL && big != NULL && c != NULL) {
        CHECK_EQ_INT(bal_pick(big, c, 0, NULL, 0), -1);
        CHECK_EQ_INT(bal_pick(small, c, 0, NULL, 0), 0);
    }
    bal_cursor_free(c);
    bal_pool_free(small);
    bal_pool_free(big);
}

static void test_hash(void)
{
    enum { N = 65536, BUCKETS = 16 };
    static unsigned low[BUCKETS], high[BUCKETS];
    uint32_t zero = 0;

    CHECK(bal_hash_bytes("web1", 4) == bal_hash_bytes("web1", 4));
    CHECK(bal_hash_bytes("web1", 4) != bal_hash_bytes("web2", 4));
    CHECK(bal_hash_bytes("", 0) != bal_hash_bytes(&zero, 1));
    CHECK(bal_hash_bytes(&zero, 1) != bal_hash_bytes(&zero, 2));

    /* Consecutive IPv4 addresses must spread over both ends of the hash:
     * source hashing and the random draw read different bits. */
    for (uint32_t i = 0; i < N; i++) {
        uint32_t addr = UINT32_C(0x0a000000) + i;
        uint64_t h = bal_hash_bytes(&addr, sizeof(addr));

        low[h % BUCKETS]++;
        high[h >> 60]++;
    }
    for (int b = 0; b < BUCKETS; b++) {
        CHECK(low[b] > N / BUCKETS * 9 / 10 && low[b] < N / BUCKETS * 11 / 10);
        CHECK(high[b] > N / BUCKETS * 9 / 10 && high[b] < N / BUCKETS * 11 / 10);
    }
}

/* Source hashing reads u from the top bits and the random draw takes a
 * modulo of the low ones: flipping any input bit must flip each output bit
 * about half the time, which plain FNV-1a does not do for its last bytes. */
static void test_hash_avalanche(void)
{
    enum { INPUTS = 2000 };
    static unsigned flips[64][64];   /* [input bit][output bit] */

    for (uint32_t k = 0; k < INPUTS; k++) {
        uint64_t in = (uint64_t)k * UINT64_C(0x9e3779b97f4a7c15);
        uint64_t h = bal_hash_bytes(&in, sizeof(in));

        for (int ib = 0; ib < 64; ib++) {
            uint64_t flipped = in ^ (UINT64_C(1) << ib);
            uint64_t d = h ^ bal_hash_bytes(&flipped, sizeof(flipped));

            for (int ob = 0; ob < 64; ob++)
                flips[ib][ob] += (unsigned)(d >> ob) & 1;
        }
    }
    for (int ib = 0; ib < 64; ib++)
        for (int ob = 0; ob < 64; ob++)
            if (flips[ib][ob] < INPUTS * 4 / 10 ||
                flips[ib][ob] > INPUTS * 6 / 10) {
                fprintf(stderr, "input bit %d flips output bit %d %u/%d "
                        "times\n", ib, ob, flips[ib][ob], INPUTS);
                CHECK(!"avalanche");
                return;
            }
}

/* Caps: a server at max_active is passed over; the last slot goes to one
 * taker; with every server full the pick says FULL, with none in rotation
 * NONE. */
static void test_caps(void)
{
    static const uint32_t w[] = {1, 1};
    struct bal_pool *p = bal_pool_new(BAL_ALGO_ROUNDROBIN, 2, w, names);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    bool again;
    int a, b;

    CHECK(p != NULL && c != NULL);
    if (p == NULL || c == NULL)
        return;
    bal_server_set_cap(p, 0, 1);
    bal_server_set_cap(p, 1, 2);
    a = bal_pick_attempt(p, c, 0, NULL, 0, &again);
    b = bal_pick_attempt(p, c, 0, NULL, 0, &again);
    CHECK(a != b && a >= 0 && b >= 0 && !again);
    CHECK_EQ_INT(bal_pick_attempt(p, c, 0, NULL, 0, &again), 1);
    CHECK_EQ_INT(bal_server_active(p, 0), 1);
    CHECK_EQ_INT(bal_server_active(p, 1), 2);
    CHECK_EQ_INT(bal_pick_attempt(p, c, 0, NULL, 0, &again), BAL_PICK_FULL);
    CHECK(!bal_server_take_slot(p, 0));
    bal_server_conn_end(p, 0);
    CHECK(bal_server_take_slot(p, 0));
    CHECK(!bal_server_take_slot(p, 0));
    bal_server_set_in_rotation(p, 0, false);
    bal_server_set_in_rotation(p, 1, false);
    CHECK_EQ_INT(bal_pick_attempt(p, c, 0, NULL, 0, &again), BAL_PICK_NONE);
    bal_server_conn_end(p, 1);
    CHECK(!bal_server_take_slot(p, 1));     /* out of rotation: no slot */
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Retries: untried servers first; then the one whose last attempt is the
 * oldest, marked as a repeat; servers out of rotation never. */
static void test_attempt_order(void)
{
    static const uint32_t w[] = {1, 1, 1};
    struct bal_pool *p = bal_pool_new(BAL_ALGO_ROUNDROBIN, 3, w, names);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    uint32_t tried[8];
    bool again;
    int i;

    CHECK(p != NULL && c != NULL);
    if (p == NULL || c == NULL)
        return;
    tried[0] = 2;
    tried[1] = 0;
    i = bal_pick_attempt(p, c, 0, tried, 2, &again);
    CHECK_EQ_INT(i, 1);
    CHECK(!again);
    bal_server_conn_end(p, 1);
    tried[2] = 1;
    CHECK_EQ_INT(bal_pick_attempt(p, c, 0, tried, 3, &again), 2);
    CHECK(again);
    bal_server_conn_end(p, 2);
    tried[3] = 2;                           /* 2 0 1 2: 0 is the oldest now */
    CHECK_EQ_INT(bal_pick_attempt(p, c, 0, tried, 4, &again), 0);
    bal_server_conn_end(p, 0);
    bal_server_set_in_rotation(p, 0, false);
    CHECK_EQ_INT(bal_pick_attempt(p, c, 0, tried, 4, &again), 1);
    CHECK(again);
    bal_server_conn_end(p, 1);
    bal_server_set_in_rotation(p, 1, false);
    bal_server_set_in_rotation(p, 2, false);
    CHECK_EQ_INT(bal_pick_attempt(p, c, 0, tried, 4, &again), BAL_PICK_NONE);
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Pauses: 50-150% of 25 ms doubling per repeat, capped at 1 s, and not
 * all alike. */
static void test_retry_pause(void)
{
    static const uint32_t w[] = {1};
    struct bal_pool *p = bal_pool_new(BAL_ALGO_RANDOM, 1, w, names);
    struct bal_cursor *c = bal_cursor_new(p, 3);
    static const uint32_t base[] = {25, 50, 100, 200, 400, 800, 1000, 1000, 1000};

    CHECK(p != NULL && c != NULL);
    if (p == NULL || c == NULL)
        return;
    for (uint32_t again = 1; again <= 9; again++) {
        uint32_t lo = UINT32_MAX, hi = 0;

        for (int k = 0; k < 200; k++) {
            uint32_t ms = bal_retry_pause_ms(c, again);

            lo = ms < lo ? ms : lo;
            hi = ms > hi ? ms : hi;
        }
        CHECK(lo >= base[again - 1] / 2);
        CHECK(hi < base[again - 1] * 3 / 2);
        CHECK(hi - lo > base[again - 1] / 2);   /* jittered */
    }
    CHECK(bal_retry_pause_ms(c, 1000) < 1500);
    bal_cursor_free(c);
    bal_pool_free(p);
}

int main(void)
{
    test_caps();
    test_attempt_order();
    test_retry_pause();
    test_empty_pool();
    test_new_state();
    test_accounting();
    test_cursor_of_other_pool();
    test_hash();
    test_hash_avalanche();
    return CHECK_DONE();
}
