/*
 * pool_test.c - tests balancer/pool.c: building pools and cursors, rotation
 * and connection accounting, bal_pick()'s guards and bal_hash_bytes().
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

int main(void)
{
    test_empty_pool();
    test_new_state();
    test_accounting();
    test_cursor_of_other_pool();
    test_hash();
    test_hash_avalanche();
    return CHECK_DONE();
}
