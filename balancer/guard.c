/*
 * guard.c - the minimum-pool guard: which servers stay in rotation when
 * health checks would take a pool below its floor. Pure.
 *
 * Healthy servers (not taken out by an operator) are always in. Servers an
 * operator took out are always out: an operator who disables a server means
 * it, but they count, since the floor is about servers in rotation. If the
 * healthy ones are fewer than the floor, failing servers are held in
 * rotation ("guarded") to make up the difference, chosen as the least bad:
 *   1. those already guarded, so that a held server is never swapped for
 *      another (no flapping at the floor);
 *   2. then those whose failure began last, so the servers that went down
 *      first leave first.
 * Each call recomputes the whole pool from these inputs, so a recovery
 * elsewhere, or a guarded server's own recovery, releases held servers as
 * soon as the floor allows.
 */
#include <stdlib.h>

#include "bal.h"

uint32_t
bal_guard_floor(uint32_t min_servers, bool is_percent, size_t nservers)
{
    uint64_t floor = min_servers;

    if (is_percent)         /* rounded up: 50% of 3 servers is 2 */
        floor = ((uint64_t)min_servers * nservers + 99) / 100;
    return floor > nservers ? (uint32_t)nservers : (uint32_t)floor;
}

/* true when a should be held before b */
static bool
bal_guard_prefer(const struct bal_guard_server *a, const struct bal_guard_server *b)
{
    if (a->was_guarded != b->was_guarded)
        return a->was_guarded;
    return a->down_since_ms > b->down_since_ms;
}

void
bal_guard_apply(struct bal_guard_server *s, size_t n, uint32_t floor)
{
    size_t healthy = 0;
    size_t need;

    for (size_t i = 0; i < n; i++) {
        s[i].in_rotation = s[i].is_healthy && !s[i].is_admin_out;
        s[i].guarded = false;
        healthy += s[i].in_rotation;
    }
    need = floor > healthy ? floor - healthy : 0;
    /* Pick the `need` best failing servers; n is a pool, so a selection by
     * repeated scans is plenty. */
    while (need > 0) {
        struct bal_guard_server *best = NULL;

        for (size_t i = 0; i < n; i++) {
            struct bal_guard_server *c = &s[i];

            if (c->in_rotation || c->is_admin_out || c->is_healthy)
                continue;
            if (best == NULL || bal_guard_prefer(c, best))
                best = c;
        }
        if (best == NULL)
            break;              /* fewer candidates than the floor needs */
        best->in_rotation = true;
        best->guarded = true;
        need--;
    }
}
