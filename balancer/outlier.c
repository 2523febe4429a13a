/*
 * outlier.c - outlier detection from live traffic: errors counted in a
 * sliding window, ejections that double, the pool's cap. See bal_outlier.h.
 *
 * The window. Keeping the last N error times exactly would take a ring of
 * N 8-byte stamps per server: 8 KB at N = 1000, 80 MB for 10,000 servers.
 * Instead the window is BAL_OUTLIER_BUCKETS buckets of width w =
 * window / BAL_OUTLIER_BUCKETS (rounded up), each holding a count per
 * kind; bucket number t / w takes the errors seen at time t, and a record
 * that moves into a later bucket empties the buckets it passes. The ten
 * buckets that count at time t are those numbered t / w - 9 .. t / w: they
 * reach back between 9 w and 10 w from t. So:
 *   - an error older than the window never counts: errors spread wider
 *     than the window never eject (no false ejection);
 *   - an error between 0.9 and 1.0 of the window old may already be gone:
 *     the window is exact to one bucket, a tenth of it, on the side of
 *     ejecting later, never sooner.
 * 80 bytes of counts per server (uint16_t: N is at most 1000; a count
 * saturates, it never wraps).
 *
 * Ejection length: eject times 2^level, level 0..4, the factor capped at
 * BAL_OUTLIER_MAX_FACTOR: 1x, 2x, 4x, 8x, 10x, 10x... (the issue's
 * contract: doubling, at most 10 times the base). Envoy multiplies its
 * base_ejection_time by a count instead (1x, 2x, 3x ... up to
 * max_ejection_time, 300 s by default), and lowers that count by one for
 * each sweep interval a host spends healthy (outlier_detection_impl.cc,
 * checkHostForUneject). We keep that rule with our own unit: the level
 * falls by one for each whole eject time the server spent back in rotation
 * since its last ejection ended, so a server at the cap is back to 1x
 * after four clean eject times (2 min at 30 s), and one that fails again
 * soon after it came back stays long out. It is the gentler of the two
 * choices the issue offered: a reset after 10 x eject without an ejection
 * would forget all at once, and would keep a server that fails once every
 * 9 eject times at the cap forever. The level moves only at an ejection
 * (lazily, from _back_ms), so no timer is needed for it.
 */
#include "bal_outlier.h"

#include <stdio.h>
#include <string.h>

#include "lb_enum.h"

/* Level 4 is 16x, above the cap: every repeat after it stays at 10x, and a
 * server there needs four clean eject times to get back to 1x. */
#define BAL_OUTLIER_LEVEL_MAX 4u

_Static_assert((1u << BAL_OUTLIER_LEVEL_MAX) >= BAL_OUTLIER_MAX_FACTOR &&
               (1u << (BAL_OUTLIER_LEVEL_MAX - 1)) < BAL_OUTLIER_MAX_FACTOR,
               "BAL_OUTLIER_LEVEL_MAX is the first level at the cap");
_Static_assert(sizeof(struct bal_outlier) <= 128, "a server's outlier state stays small");

/* Indexed by enum bal_outlier_kind: the metric's label values. */
static const char *const bal_outlier_kind_names[] = {
    [BAL_OUTLIER_CONNECT_REFUSED] = "connect_refused",
    [BAL_OUTLIER_CONNECT_TIMEOUT] = "connect_timeout",
    [BAL_OUTLIER_RESET] = "reset",
    [BAL_OUTLIER_NO_FIRST_BYTE] = "no_first_byte",
};

/* How the reason text says each kind, for one error and for more. */
static const char *const bal_outlier_kind_text[BAL_OUTLIER_KINDS][2] = {
    [BAL_OUTLIER_CONNECT_REFUSED] = { "connect refused", "connect refused" },
    [BAL_OUTLIER_CONNECT_TIMEOUT] = { "connect timeout", "connect timeouts" },
    [BAL_OUTLIER_RESET] = { "reset before the first byte", "resets before the first byte" },
    [BAL_OUTLIER_NO_FIRST_BYTE] = { "no first byte", "no first byte" },
};

LB_ENUM_NAME(bal_outlier_kind_name, enum bal_outlier_kind, bal_outlier_kind_names, "unknown")

void
bal_outlier_init(struct bal_outlier *o)
{
    memset(o, 0, sizeof(*o));
}

static uint64_t
bal_outlier_bucket_ms(const struct bal_outlier_conf *conf)
{
    uint64_t w = (conf->window_ms + BAL_OUTLIER_BUCKETS - 1) / BAL_OUTLIER_BUCKETS;

    return w > 0 ? w : 1;
}

static void
bal_outlier_clear_window(struct bal_outlier *o)
{
    memset(o->_counts, 0, sizeof(o->_counts));
}

/* Moves the newest bucket to number `to`, emptying those it passes (all of
 * them when it passes more than the window holds). */
static void
bal_outlier_advance(struct bal_outlier *o, uint64_t to)
{
    if (to - o->_head >= BAL_OUTLIER_BUCKETS) {
        bal_outlier_clear_window(o);
    } else {
        for (uint64_t b = o->_head + 1; b <= to; b++)
            memset(o->_counts[b % BAL_OUTLIER_BUCKETS], 0,
                   sizeof(o->_counts[0]));
    }
    o->_head = to;
}

bool
bal_outlier_record(struct bal_outlier *o, const struct bal_outlier_conf *conf,
                   enum bal_outlier_kind k, uint64_t now_ms)
{
    uint64_t w = bal_outlier_bucket_ms(conf), bucket = now_ms / w;
    uint32_t sum[BAL_OUTLIER_KINDS] = { 0 }, total = 0;

    if (conf->errors == 0 || o->_is_ejected || (unsigned)k >= BAL_OUTLIER_KINDS)
        return false;
    if (o->_bucket_ms != w) {
        /* first error, or a reload changed the window: the old buckets'
         * numbers mean other times now */
        bal_outlier_clear_window(o);
        o->_bucket_ms = w;
        o->_head = bucket;
    }
    if (bucket > o->_head)
        bal_outlier_advance(o, bucket);
    /* An event posted a little before a later one that was handled first
     * still counts, in its own bucket, while that bucket is in the
     * window. */
    if (o->_head - bucket < BAL_OUTLIER_BUCKETS) {
        uint16_t *c = &o->_counts[bucket % BAL_OUTLIER_BUCKETS][k];

        if (*c < UINT16_MAX)
            (*c)++;
    }
    for (size_t b = 0; b < BAL_OUTLIER_BUCKETS; b++)
        for (size_t i = 0; i < BAL_OUTLIER_KINDS; i++)
            sum[i] += o->_counts[b][i];
    for (size_t i = 0; i < BAL_OUTLIER_KINDS; i++)
        total += sum[i];
    if (total < conf->errors)
        return false;
    for (size_t i = 0; i < BAL_OUTLIER_KINDS; i++)
        o->_reason[i] = sum[i] < UINT16_MAX ? (uint16_t)sum[i] : UINT16_MAX;
    return true;
}

uint64_t
bal_outlier_eject(struct bal_outlier *o, const struct bal_outlier_conf *conf,
                  uint64_t now_ms)
{
    uint64_t base = conf->eject_ms > 0 ? conf->eject_ms : 1;
    uint64_t factor;

    if (o->_is_ejected)
        return o->_until_ms;
    /* Envoy's rule in eject times: one level less per whole eject time
     * spent back in rotation since the last ejection ended. */
    if (o->_back_ms != 0 && now_ms > o->_back_ms) {
        uint64_t clean = (now_ms - o->_back_ms) / base;

        o->_level = clean >= o->_level ? 0 : (uint8_t)(o->_level - clean);
    }
    factor = (uint64_t)1 << o->_level;
    if (factor > BAL_OUTLIER_MAX_FACTOR)
        factor = BAL_OUTLIER_MAX_FACTOR;
    if (o->_level < BAL_OUTLIER_LEVEL_MAX)
        o->_level++;
    o->_is_ejected = true;
    o->_is_refused = false;
    o->_until_ms = now_ms + base * factor;
    bal_outlier_clear_window(o);
    return o->_until_ms;
}

bool
bal_outlier_refused(struct bal_outlier *o)
{
    bool is_first = !o->_is_refused;

    o->_is_refused = true;
    return is_first;
}

bool
bal_outlier_is_ejected(const struct bal_outlier *o, uint64_t now_ms)
{
    return o->_is_ejected && now_ms < o->_until_ms;
}

bool
bal_outlier_expire(struct bal_outlier *o, uint64_t now_ms)
{
    if (!o->_is_ejected || now_ms < o->_until_ms)
        return false;
    o->_is_ejected = false;
    /* The clean time starts when it was due back: a late tick of the
     * caller must not count as time out of rotation. */
    o->_back_ms = o->_until_ms;
    return true;
}

bool
bal_outlier_is_before_return(const struct bal_outlier *o, uint64_t began_ms)
{
    return began_ms < o->_back_ms;
}

bool
bal_outlier_may_eject(size_t n_total, size_t n_ejected, uint32_t max_eject_percent)
{
    /* (n_ejected + 1) / n_total <= max / 100, in integers */
    return n_ejected < n_total &&
           ((uint64_t)n_ejected + 1) * 100 <= (uint64_t)n_total * max_eject_percent;
}

/* The kinds in reason order: most errors first, ties in enum order. */
static void
bal_outlier_reason_order(const struct bal_outlier *o, enum bal_outlier_kind order[])
{
    for (size_t i = 0; i < BAL_OUTLIER_KINDS; i++)
        order[i] = (enum bal_outlier_kind)i;
    for (size_t i = 1; i < BAL_OUTLIER_KINDS; i++) {        /* stable insertion */
        enum bal_outlier_kind k = order[i];
        size_t j = i;

        for (; j > 0 && o->_reason[order[j - 1]] < o->_reason[k]; j--)
            order[j] = order[j - 1];
        order[j] = k;
    }
}

enum bal_outlier_kind
bal_outlier_reason_kind(const struct bal_outlier *o)
{
    enum bal_outlier_kind order[BAL_OUTLIER_KINDS];

    bal_outlier_reason_order(o, order);
    return order[0];
}

int
bal_outlier_reason(const struct bal_outlier *o, const struct bal_outlier_conf *conf,
                   char *buf, size_t len)
{
    enum bal_outlier_kind order[BAL_OUTLIER_KINDS];
    size_t used = 0;
    int n, listed = 0;

    /* snprintf's count even when buf is short, so the caller can tell */
#define BAL_OUTLIER_PUT(...)                                                 \
    do {                                                                     \
        n = snprintf(used < len ? buf + used : NULL, used < len ? len - used : 0, \
                     __VA_ARGS__);                                           \
        if (n < 0)                                                           \
            return n;                                                        \
        used += (size_t)n;                                                   \
    } while (0)

    if (len > 0)
        buf[0] = '\0';
    bal_outlier_reason_order(o, order);
    BAL_OUTLIER_PUT("outlier:");
    for (size_t i = 0; i < BAL_OUTLIER_KINDS; i++) {
        unsigned count = o->_reason[order[i]];

        if (count == 0)
            break;
        BAL_OUTLIER_PUT("%s %u %s", listed++ ? "," : "", count,
                        bal_outlier_kind_text[order[i]][count > 1]);
    }
    if (listed == 0)
        BAL_OUTLIER_PUT(" no errors");
    if (conf->window_ms % 1000 == 0)
        BAL_OUTLIER_PUT(" in %llu s", (unsigned long long)(conf->window_ms / 1000));
    else
        BAL_OUTLIER_PUT(" in %llu ms", (unsigned long long)conf->window_ms);
#undef BAL_OUTLIER_PUT
    return (int)used;
}
