/*
 * algo_source.c - consistent hashing of the client address: a Maglev
 * lookup table (Eisenbud et al., NSDI 2016), as Envoy's maglev policy.
 *
 * The table has about BAL_SOURCE_SLOTS_PER_SERVER slots per server, each
 * naming a server; a client's hash picks a slot, O(1). It is built once
 * with the pool from the configured servers and weights: every server
 * fills slots in turn along its own permutation of the table (an offset
 * and a step from the hash of its name), as many as its weight's part of
 * the table, so that
 *   - each server holds its weight's part of the slots to within one slot
 *     (5% of its traffic at 20 slots a server);
 *   - the table depends on the names and weights only, not on the order
 *     of the servers in the config (they fill in the order of their name's
 *     hash), so clients stay put across reloads that reorder them; a reload
 *     that adds or removes servers moves few clients besides theirs.
 *
 * What changes while workers pick does not touch the table: a client whose
 * slot names a server out of rotation, at its cap or already tried hashes
 * again (its next slot in a sequence of its own), so
 *   - when a server leaves rotation exactly its clients move, spread over
 *     the others by weight, and they come back when it returns;
 *   - a retry gets the client's next server, the same on every retry;
 *   - a server below its full share (slow start, warning) keeps the part
 *     share of its clients, the same ones as long as its share does not
 *     drop, and the rest hash again.
 * The rendezvous hashing used before gave the same guarantees at O(n) a
 * pick with a log() per server: 1.1 ms at 100,000 servers.
 */
#include <stdlib.h>

#include "bal_algo.h"

#define BAL_SOURCE_SLOTS_PER_SERVER 20
/* Tables of fewer slots would round small weights away. */
#define BAL_SOURCE_SLOTS_MIN 1021
/* Hashing again fails this many times only when most of the pool's weight
 * is out of reach (with 90% out, 1 client in 800 gets that far); the
 * client then takes the next eligible server after its last slot's, O(n). */
#define BAL_SOURCE_TRIES 64

static bool bal_is_prime(uint64_t m)
{
    if (m < 2)
        return false;
    for (uint64_t d = 2; d * d <= m; d++)
        if (m % d == 0)
            return false;
    return true;
}

/* One server's walk along its permutation of the table. */
struct bal_source_filler {
    uint32_t server;
    uint32_t quota;       /* slots it is still to own */
    uint32_t at;          /* its place along its permutation: starts at an
                             offset, moves by step (mod the table's size) */
    uint32_t step;
};

static int bal_source_filler_cmp(const void *a, const void *b, void *arg)
{
    const struct bal_pool *p = arg;
    const struct bal_source_filler *x = a, *y = b;
    uint64_t hx = p->servers[x->server].id_hash, hy = p->servers[y->server].id_hash;

    if (hx != hy)
        return hx < hy ? -1 : 1;
    return x->server < y->server ? -1 : x->server > y->server;
}

/* Each server's share of the m slots by weight, rounded down, and the
 * slots left by the rounding one each to the first servers. */
static void bal_source_quotas(const struct bal_pool *p, struct bal_source_filler *f,
                              uint64_t m)
{
    size_t n = p->nservers;
    double total = 0.0;
    uint64_t given = 0;   /* m < 2^32: bal_algo_source_build */

    for (size_t i = 0; i < n; i++)
        total += p->servers[i].weight;
    for (size_t i = 0; i < n; i++) {
        f[i].quota = (uint32_t)((double)m * p->servers[f[i].server].weight / total);
        given += f[i].quota;
    }
    for (size_t i = 0; given < m; i = (i + 1) % n, given++)
        f[i].quota++;
}

bool bal_algo_source_build(struct bal_pool *p)
{
    size_t n = p->nservers, active;
    uint64_t m = (uint64_t)n * BAL_SOURCE_SLOTS_PER_SERVER;
    struct bal_source_filler *f;

    if (n == 0)
        return true;
    m = m < BAL_SOURCE_SLOTS_MIN ? BAL_SOURCE_SLOTS_MIN : m;
    while (!bal_is_prime(m))
        m++;
    if (m > UINT32_MAX / 2)
        return false;   /* 40 million servers: no memory for them anyway */
    p->table = malloc(m * sizeof(*p->table));
    f = malloc(n * sizeof(*f));
    if (p->table == NULL || f == NULL) {
        free(f);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t h = p->servers[i].id_hash;

        f[i] = (struct bal_source_filler){
            .server = (uint32_t)i,
            .at = (uint32_t)(bal_mix64(h ^ UINT64_C(0x5851f42d4c957f2d)) % m),
            .step = (uint32_t)(bal_mix64(h ^ UINT64_C(0x14057b7ef767814f)) % (m - 1) + 1),
        };
    }
    qsort_r(f, n, sizeof(*f), bal_source_filler_cmp, p);
    bal_source_quotas(p, f, m);
    for (uint64_t s = 0; s < m; s++)
        p->table[s] = UINT32_MAX;

    /* Rounds: every server with slots still to own takes its next free
     * one along its permutation; those done leave the list. */
    active = n;
    while (active > 0) {
        size_t kept = 0;

        for (size_t k = 0; k < active; k++) {
            struct bal_source_filler *x = &f[k];
            if (x->quota == 0)
                continue;
            /* m is prime, so the walk visits every slot before repeating:
             * a free one is always found. */
            while (p->table[x->at] != UINT32_MAX)
                x->at = x->at >= m - x->step ? x->at - (uint32_t)(m - x->step) : x->at + x->step;
            p->table[x->at] = x->server;
            x->quota--;
            f[kept++] = *x;
        }
        active = kept;
    }
    free(f);
    p->table_len = (size_t)m;
    return true;
}

/* The share check of a client's k-th hash h at server i: the same answer
 * for the same client while the share stays, and a growing share keeps
 * the clients it had. Drawn anew at each hash, not once per client and
 * server, or a client turned away once would never land there again and
 * the server would get share squared of its part. */
static bool bal_source_admits(const struct bal_pool *p, size_t i, uint64_t h)
{
    return bal_share_admits(p, i, bal_mix64(h ^ p->servers[i].id_hash));
}

static size_t bal_source_slot(const struct bal_pool *p, uint64_t h)
{
    return (size_t)(((unsigned __int128)h * p->table_len) >> 64);
}

int bal_algo_source_pick(const struct bal_pool *p, uint64_t client_hash,
                         const uint32_t *tried, size_t ntried)
{
    uint64_t h = client_hash;
    size_t i = 0;

    for (int k = 0; k < BAL_SOURCE_TRIES; k++) {
        i = p->table[bal_source_slot(p, h)];
        if (bal_server_eligible(p, i, tried, ntried) && bal_source_admits(p, i, h))
            return (int)i;
        h = bal_mix64(h + UINT64_C(0x9e3779b97f4a7c15));
    }
    /* Shares are left aside here: a server ramping up may be the only one
     * left, and any server in reach beats none. */
    for (size_t k = 1; k <= p->nservers; k++) {
        size_t j = (i + k) % p->nservers;

        if (bal_server_eligible(p, j, tried, ntried))
            return (int)j;
    }
    return -1;
}
