/*
 * algo_leastconn.c - fewest active connections relative to weight.
 *
 * Suits long and uneven connections, where round robin would keep sending
 * to a server stuck with slow clients. The counts are shared by all workers
 * (atomics in the pool), so each worker sees the others' load, a few
 * connections late at most.
 *
 * A scan of every server costs O(n) a pick: 186 us at 100,000 servers.
 * Instead, as HAProxy's ebtree of servers by load (lb_fwlc.c), the pool
 * keeps a tournament tree: each inner node names the better of its two
 * children's winners, so the root names the least loaded server, O(1) to
 * read. A change to one server (a connection opened or closed, rotation,
 * share or cap) replays the matches on its way to the root, O(log n). The
 * matches read the servers' counts as they are now, with no lock: two
 * workers replaying at once may leave a node naming the worse of its two
 * candidates until either of them changes (picking it is a change), and a
 * connection closed through an older generation's pool (a reload) replays
 * that pool's tree, not this one's, with the same effect. A pick checks
 * that the root's server is still eligible and scans when it is not (or
 * was tried by this connection), so a stale node costs a less than best
 * pick, never a wrong one.
 *
 * Ties go to the server picked longest ago (a pool-wide clock stamps each
 * pick), so servers with equal load take turns across workers.
 */
#include <stdlib.h>

#include "bal_algo.h"

#define BAL_LC_NONE UINT32_MAX

/* What a match compares of one server, read once. */
struct bal_lc_key {
    uint32_t server;      /* BAL_LC_NONE: an empty leaf, which loses */
    bool is_available;
    uint64_t load;        /* active + 1 */
    uint64_t weight;      /* weight * share */
    uint64_t picked_at;
};

static struct bal_lc_key bal_lc_key(const struct bal_pool *p, uint32_t i)
{
    struct bal_lc_key k = { .server = i };

    if (i == BAL_LC_NONE)
        return k;
    k.is_available = bal_server_available(p, i);
    k.load = bal_server_active(p, i) + UINT64_C(1);
    k.weight = bal_server_weight(p, i);
    k.picked_at = atomic_load_explicit(&p->lc_picked_at[i], memory_order_relaxed);
    return k;
}

/* True when a is the better pick: a server before an empty leaf, available
 * before not, then the lower (active + 1) / weight, then the one picked
 * longest ago, then the lower index. */
static bool bal_lc_better(const struct bal_lc_key *a, const struct bal_lc_key *b)
{
    unsigned __int128 x, y;

    if (a->server == BAL_LC_NONE || b->server == BAL_LC_NONE)
        return b->server == BAL_LC_NONE && a->server != BAL_LC_NONE;
    if (a->is_available != b->is_available)
        return a->is_available;
    /* (active + 1)/weight, as HAProxy compares: with active alone a server
     * at 0 would win whatever its weight, and one ramping up (slow start)
     * would take every new connection while it has none. Without a
     * division, in 128 bits: a weight of 2^32 times a share of 1000 times
     * 2^32 connections would not fit in 64. */
    x = (unsigned __int128)a->load * b->weight;
    y = (unsigned __int128)b->load * a->weight;
    if (x != y)
        return x < y;
    if (a->picked_at != b->picked_at)
        return a->picked_at < b->picked_at;
    return a->server < b->server;
}

static uint32_t bal_lc_node(const struct bal_pool *p, size_t node)
{
    return atomic_load_explicit(&p->lc_tree[node], memory_order_relaxed);
}

bool bal_algo_leastconn_build(struct bal_pool *p)
{
    size_t leaves = 1;

    while (leaves < p->nservers)
        leaves *= 2;
    p->lc_tree = malloc(2 * leaves * sizeof(*p->lc_tree));
    p->lc_picked_at = calloc(p->nservers > 0 ? p->nservers : 1, sizeof(*p->lc_picked_at));
    if (p->lc_tree == NULL || p->lc_picked_at == NULL)
        return false;
    p->lc_leaves = leaves;
    for (size_t i = 0; i < leaves; i++)
        atomic_init(&p->lc_tree[leaves + i], i < p->nservers ? (uint32_t)i : BAL_LC_NONE);
    atomic_init(&p->lc_tree[0], BAL_LC_NONE);
    for (size_t node = 1; node < leaves; node++)
        atomic_init(&p->lc_tree[node], BAL_LC_NONE);
    bal_algo_leastconn_refresh(p);
    return true;
}

void bal_algo_leastconn_refresh(struct bal_pool *p)
{
    for (size_t node = p->lc_leaves - 1; node >= 1; node--) {
        struct bal_lc_key a = bal_lc_key(p, bal_lc_node(p, 2 * node));
        struct bal_lc_key b = bal_lc_key(p, bal_lc_node(p, 2 * node + 1));

        atomic_store_explicit(&p->lc_tree[node], bal_lc_better(&a, &b) ? a.server : b.server,
                              memory_order_relaxed);
    }
}

/* Replays server i's matches towards the root, carrying the winner's key
 * up so that each level reads only the other side's server. It stops
 * where the winner stays what it was and is not i: nothing above that
 * node can change. */
void bal_algo_leastconn_changed(struct bal_pool *p, size_t i)
{
    size_t from = p->lc_leaves + i;
    struct bal_lc_key won = bal_lc_key(p, (uint32_t)i);

    for (size_t node = from / 2; node >= 1; from = node, node /= 2) {
        struct bal_lc_key other = bal_lc_key(p, bal_lc_node(p, from ^ 1));
        uint32_t was = bal_lc_node(p, node);

        if (bal_lc_better(&other, &won))
            won = other;
        if (won.server == was && was != (uint32_t)i)
            return;
        if (won.server != was)
            atomic_store_explicit(&p->lc_tree[node], won.server, memory_order_relaxed);
    }
}

/* The exact answer in O(n), for a connection's retries and when the root
 * is stale. Ties are broken round robin without weights: the scan starts
 * where the previous one of this cursor left off. */
static int bal_lc_scan(const struct bal_pool *p, struct bal_cursor *c,
                       const uint32_t *tried, size_t ntried)
{
    size_t n = p->nservers;
    size_t i = c->lc_next < n ? c->lc_next : 0;
    uint64_t best_active = 0, best_weight = 1;
    int best = -1;

    for (size_t k = 0; k < n; k++, i = (i + 1 == n) ? 0 : i + 1) {
        uint64_t active, weight;

        if (!bal_server_eligible(p, i, tried, ntried))
            continue;
        active = bal_server_active(p, i) + UINT64_C(1);
        weight = bal_server_weight(p, i);
        if (best < 0 || (unsigned __int128)active * best_weight <
                            (unsigned __int128)best_active * weight) {
            best = (int)i;
            best_active = active;
            best_weight = weight;
        }
    }
    if (best >= 0)
        c->lc_next = ((size_t)best + 1 == n) ? 0 : (size_t)best + 1;
    return best;
}

/* Stamps the pick for the ties; the caller replays its matches once the
 * slot is taken (bal_server_take_slot), which changes its load too. */
int bal_algo_leastconn_pick(const struct bal_pool *p, struct bal_cursor *c,
                            const uint32_t *tried, size_t ntried)
{
    struct bal_pool *mp = (struct bal_pool *)p;     /* the tree is atomics */
    uint32_t r = bal_lc_node(p, 1);
    int i = r != BAL_LC_NONE && bal_server_eligible(p, r, tried, ntried)
                ? (int)r
                : bal_lc_scan(p, c, tried, ntried);

    if (i >= 0)
        atomic_store_explicit(&mp->lc_picked_at[i],
                              atomic_fetch_add_explicit(&mp->lc_clock, 1, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    return i;
}
