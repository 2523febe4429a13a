/*
 * algo_source_test.c - tests balancer/algo_source.c: consistent hashing of
 * the client address by a Maglev table.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "algo_fixture.h"

enum { CLIENTS = 20000 };

static const char *const names[] = {"web1", "web2", "web3", "web4", "web5"};

static struct bal_pool *pool(size_t n, const uint32_t *w,
                             const char *const *nm)
{
    return bal_pool_new(BAL_ALGO_SOURCE, n, w, nm);
}

/* The same client lands on the same server whatever the worker, and on
 * the same server name after a reload that reorders the servers. */
static void test_sticky(void)
{
    static const uint32_t w[] = {1, 2, 3, 4, 5};
    static const uint32_t w_rev[] = {5, 4, 3, 2, 1};
    static const char *const rev[] = {"web5", "web4", "web3", "web2", "web1"};
    struct bal_pool *p = pool(5, w, names);
    struct bal_pool *q = pool(5, w_rev, rev);
    struct bal_cursor *c1 = bal_cursor_new(p, 1);
    struct bal_cursor *c2 = bal_cursor_new(p, 2);
    struct bal_cursor *cq = bal_cursor_new(q, 3);

    for (uint32_t k = 0; k < 1000; k++) {
        int a = bal_pick(p, c1, algo_client(k), NULL, 0);
        int b = bal_pick(p, c2, algo_client(k), NULL, 0);
        int r = bal_pick(q, cq, algo_client(k), NULL, 0);

        CHECK(a >= 0);
        CHECK_EQ_INT(a, b);
        CHECK_EQ_INT(a, bal_pick(p, c1, algo_client(k), NULL, 0));
        CHECK(r >= 0);
        if (a >= 0 && r >= 0)
            CHECK_EQ_STR(names[a], rev[r]);
    }
    bal_cursor_free(c1);
    bal_cursor_free(c2);
    bal_cursor_free(cq);
    bal_pool_free(p);
    bal_pool_free(q);
}

/* The point of consistent hashing: removing a server moves its clients and
 * no one else's, and its return brings exactly them back. */
static void test_minimal_disruption(void)
{
    static const uint32_t w[] = {1, 1, 2, 1, 3};
    static int before[CLIENTS];
    struct bal_pool *p = pool(5, w, names);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    int moved_to[5] = {0}, on_removed = 0, stayed = 0, came_back = 0;

    for (uint32_t k = 0; k < CLIENTS; k++)
        before[k] = bal_pick(p, c, algo_client(k), NULL, 0);

    bal_server_set_in_rotation(p, 2, false);
    for (uint32_t k = 0; k < CLIENTS; k++) {
        int now = bal_pick(p, c, algo_client(k), NULL, 0);

        CHECK(now >= 0 && now != 2);
        if (before[k] == 2) {
            on_removed++;
            if (now >= 0 && now < 5)
                moved_to[now]++;
        } else if (now == before[k]) {
            stayed++;
        }
    }
    CHECK_EQ_INT(stayed, CLIENTS - on_removed);
    /* web3 had weight 2 of 8. */
    CHECK(on_removed > CLIENTS / 4 - CLIENTS / 20);
    CHECK(on_removed < CLIENTS / 4 + CLIENTS / 20);
    /* Its clients spread over all the others, by weight (1,1,1,3 of 6). */
    CHECK(moved_to[0] > on_removed / 6 / 2);
    CHECK(moved_to[1] > on_removed / 6 / 2);
    CHECK(moved_to[3] > on_removed / 6 / 2);
    CHECK(moved_to[4] > moved_to[0] + moved_to[1]);

    /* Back in rotation: its clients, and only they, return to it. */
    bal_server_set_in_rotation(p, 2, true);
    for (uint32_t k = 0; k < CLIENTS; k++) {
        int now = bal_pick(p, c, algo_client(k), NULL, 0);

        if (now == before[k])
            came_back++;
    }
    CHECK_EQ_INT(came_back, CLIENTS);
    bal_cursor_free(c);
    bal_pool_free(p);
}

static void test_tried(void)
{
    static const uint32_t w[] = {2, 1, 1, 1, 2};
    struct bal_pool *p = pool(5, w, names);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    static const uint32_t all[] = {4, 3, 2, 1, 0};

    for (uint32_t k = 0; k < 2000; k++) {
        uint32_t tried[2];
        int first, second, third, alt;

        first = bal_pick(p, c, algo_client(k), NULL, 0);
        CHECK(first >= 0);
        if (first < 0)
            continue;
        tried[0] = (uint32_t)first;
        second = bal_pick(p, c, algo_client(k), tried, 1);
        CHECK(second >= 0 && second != first);
        if (second < 0)
            continue;
        /* Retrying gives the next-best server, the same as if the first
         * had left rotation. */
        bal_server_set_in_rotation(p, (size_t)first, false);
        alt = bal_pick(p, c, algo_client(k), NULL, 0);
        bal_server_set_in_rotation(p, (size_t)first, true);
        CHECK_EQ_INT(second, alt);
        tried[1] = (uint32_t)second;
        third = bal_pick(p, c, algo_client(k), tried, 2);
        CHECK(third >= 0 && third != first && third != second);
        CHECK_EQ_INT(bal_pick(p, c, algo_client(k), all, 5), -1);
    }
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* A pool of 40, every other server of weight 3, and the same pool with a
 * 41st server: the weights hold in the table to a few percent, and adding
 * a server moves little besides the clients it takes (Maglev moves a few
 * percent more, rendezvous hashing none). */
static void test_table(void)
{
    enum { N = 40, MANY = 100000 };
    static char names40[N + 1][8];
    const char *nm[N + 1];
    uint32_t w[N + 1];
    int count[N + 1] = {0}, moved = 0, to_new = 0;
    uint64_t light = 0, heavy = 0;
    struct bal_pool *p, *q;
    struct bal_cursor *c, *cq;

    for (int i = 0; i <= N; i++) {
        snprintf(names40[i], sizeof(names40[i]), "s%d", i);
        nm[i] = names40[i];
        w[i] = i % 2 == 0 ? 1 : 3;
    }
    p = pool(N, w, nm);
    q = pool(N + 1, w, nm);
    c = bal_cursor_new(p, 0);
    cq = bal_cursor_new(q, 0);
    for (uint32_t k = 0; k < MANY; k++) {
        int a = bal_pick(p, c, algo_client(k), NULL, 0);
        int b = bal_pick(q, cq, algo_client(k), NULL, 0);

        CHECK(a >= 0 && b >= 0);
        if (a < 0 || b < 0)
            continue;
        count[a]++;
        to_new += b == N;
        moved += b != N && b != a;
    }
    for (int i = 0; i < N; i++)
        *(i % 2 == 0 ? &light : &heavy) += (uint64_t)count[i];
    /* 3 times the clients, to a few percent */
    CHECK(heavy * 100 > light * 3 * 92 && heavy * 100 < light * 3 * 108);
    /* the newcomer takes its 1/81 (of weight 1 in 81) */
    CHECK(to_new > MANY / 81 / 2 && to_new < MANY / 81 * 2);
    CHECK(moved < MANY / 20);
    if (moved >= MANY / 20)
        fprintf(stderr, "  %d of %d clients moved between old servers\n", moved, MANY);
    bal_cursor_free(c);
    bal_cursor_free(cq);
    bal_pool_free(p);
    bal_pool_free(q);
}

int main(void)
{
    test_sticky();
    test_minimal_disruption();
    test_tried();
    test_table();
    return CHECK_DONE();
}
