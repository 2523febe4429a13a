/*
 * access.c - who may connect to a frontend (see data.h): the allow and
 * deny lists, and the table of sources behind max_connections_per_source
 * and rate_per_source.
 *
 * The table is one block of entries addressed by a uint32 slot, a bucket
 * array of slots for the hash chains, and an LRU list of the entries with
 * no connection open, all under one mutex. The slot is what a connection
 * keeps (struct lb_source_ref), so closing it touches its entry without a
 * lookup. An entry with a connection open is never moved or evicted, so
 * its slot stays valid and its count exact for as long as any connection
 * holds it; entries with none are the only ones the LRU list holds, and
 * the only ones eviction, a shrinking resize or compaction may touch.
 *
 * One mutex rather than shards: an uncontended enter and leave together
 * cost about 0.1 us (access_test prints it), far below what accepting a
 * connection costs, and a single LRU keeps "least recently seen" true for
 * the whole table instead of per shard.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <netinet/in.h>

#include "data.h"
#include "lb_enum.h"

static const char *const lb_deny_reason_names[] = {
    [LB_DENY_NONE] = "none",
    [LB_DENY_ACL] = "acl",
    [LB_DENY_PER_SOURCE] = "per_source_limit",
    [LB_DENY_RATE] = "rate",
};

LB_ENUM_NAME(lb_deny_reason_name, enum lb_deny_reason, lb_deny_reason_names, "unknown")

/* ------------------------------------------------------------ the lists */

/* Whether the first bits bits of a and b are equal: whole bytes, then the
 * partial one. bits is at most 8 * the arrays' length. */
static bool
lb_prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;

    if (memcmp(a, b, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return ((a[whole] ^ b[whole]) & mask) == 0;
}

static const uint8_t lb_v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* sa's address as 16 bytes, an IPv4 one as ::ffff:a.b.c.d; whether it is
 * IPv4 (native or mapped). False for other families, with *known false. */
static bool
lb_addr16(const struct sockaddr *sa, uint8_t out[16], bool *known)
{
    *known = true;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        memcpy(out, lb_v4_mapped_prefix, 12);
        memcpy(out + 12, &in->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        memcpy(out, &in6->sin6_addr, 16);
        return memcmp(out, lb_v4_mapped_prefix, 12) == 0;
    }
    *known = false;
    return false;
}

bool
lb_cidrs_match(const struct conf_cidrs *l, const struct sockaddr *sa)
{
    uint8_t a[16];
    bool known;
    bool is_v4 = lb_addr16(sa, a, &known);

    if (!known)
        return false;
    for (size_t i = 0; i < l->n && i < CONF_CIDRS_MAX; i++) {
        const struct conf_cidr *c = &l->v[i];

        if (c->family == AF_INET) {
            /* An IPv4 block holds IPv4 clients only, mapped ones included. */
            if (is_v4 && lb_prefix_equal(a + 12, c->addr, c->prefix > 32 ? 32 : c->prefix))
                return true;
        } else if (c->family == AF_INET6) {
            /* An IPv6 block holds native IPv6 clients, and IPv4 ones only
             * when it lies inside ::ffff:0:0/96 ("::ffff:10.0.0.0/104"),
             * so that "::/0" means every IPv6 client and not everyone. */
            unsigned bits = c->prefix > 128 ? 128 : c->prefix;
            if ((!is_v4 || bits >= 96) && lb_prefix_equal(a, c->addr, bits))
                return true;
        }
    }
    return false;
}

enum lb_deny_reason
lb_access_acl(const struct conf_frontend *fc, const struct sockaddr *sa)
{
    if (fc->deny.n != 0 && lb_cidrs_match(&fc->deny, sa))
        return LB_DENY_ACL;
    if (fc->allow.n != 0 && !lb_cidrs_match(&fc->allow, sa))
        return LB_DENY_ACL;
    return LB_DENY_NONE;
}

/* ------------------------------------------------------- the source table */

#define LB_SLOT_NIL UINT32_MAX              /* end of a chain or list */
#define LB_SLOT_FREE (UINT32_MAX - 1)       /* hnext of a slot with no entry */
/* Slots go up to the two markers (and LB_SOURCE_UNTRACKED, the same as
 * LB_SLOT_NIL); a bound far past any memory a table could get. */
#define LB_SOURCES_MAX_SIZE (1u << 30)
#define LB_SOURCES_MIN_ALLOC 16u
#define LB_SOURCE_PERIOD_MS 1000u

/* One source: 48 bytes (16 key, 8 period start, 3 links and 3 counts of
 * 4, no padding), plus 4 bytes of bucket per entry at a full table of a
 * power of two: 52 bytes a source at source_table_size = 65536.
 *
 * The rate is HAProxy's freq_ctr over periods of one second: admissions
 * counted in the current period, plus the previous period's count
 * weighted by the part of the current one not yet elapsed. Unlike
 * HAProxy's, the periods start at the source's first connection (and
 * again at the first after two idle periods), not on whole seconds of the
 * clock: a source that starts late in a clock second would otherwise get
 * a full burst in that partial second, and a second one from the next
 * second on (up to 2 x the rate over its first second). since_ms is 64
 * bits so that an entry idle for weeks cannot look recent after a wrap. */
struct lb_source {
    uint8_t key[16];            /* IPv4 as ::ffff:a.b.c.d, IPv6 masked to
                                   source_ipv6_prefix */
    uint64_t since_ms;          /* the current period began */
    uint32_t hnext;             /* next in its bucket's chain; LB_SLOT_FREE
                                   when the slot holds no entry */
    uint32_t lru_prev, lru_next;    /* in the LRU list while open == 0; a
                                       free slot's lru_next links the free
                                       list */
    uint32_t open;              /* connections open now */
    uint32_t cur, prev;         /* admissions in the current period, in
                                   the one before */
};

_Static_assert(sizeof(struct lb_source) == 48, "the README states 48 bytes a source");

/* Made by lb_sources_new, freed by lb_sources_free (the frontend's stats,
 * which outlive generations). Every field is under lock. */
struct lb_sources {
    pthread_mutex_t lock;
    uint32_t size;              /* capacity: entries at most, once every
                                   entry over it closed its last connection */
    uint32_t alloc;             /* slots allocated in e; <= size, except
                                   after a shrink while entries with a
                                   connection open sit past the size */
    uint32_t used;              /* slots handed out so far: [0, used) are
                                   entries or free; a free one below size
                                   is on the free list, one past size is
                                   not (it is never handed out again) */
    uint32_t n;                 /* entries */
    uint32_t nbuckets;          /* a power of two >= alloc */
    uint32_t free_head;         /* free slots below size */
    uint32_t lru_head, lru_tail;    /* most, least recently seen, idle */
    struct lb_source *e;
    uint32_t *buckets;
    uint64_t now_ms;            /* the latest enter's clock, for leave */
    uint64_t seed[2];           /* of the hash, random: a client cannot
                                   pick addresses that share a chain */
    uint64_t evictions, untracked;
};

/* SipHash-1-3 of the 16-byte key: keyed, so chain lengths stay what
 * chance makes them whichever addresses a client owns (an IPv6 client
 * picks its /64s freely within its /48), and about 15 ns. */
#define LB_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define LB_SIPROUND                                                         \
    do {                                                                    \
        v0 += v1; v1 = LB_ROTL(v1, 13); v1 ^= v0; v0 = LB_ROTL(v0, 32);     \
        v2 += v3; v3 = LB_ROTL(v3, 16); v3 ^= v2;                           \
        v0 += v3; v3 = LB_ROTL(v3, 21); v3 ^= v0;                           \
        v2 += v1; v1 = LB_ROTL(v1, 17); v1 ^= v2; v2 = LB_ROTL(v2, 32);     \
    } while (0)

static uint32_t
lb_sources_hash(const struct lb_sources *t, const uint8_t key[16])
{
    uint64_t k0 = t->seed[0], k1 = t->seed[1], m[2];
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    uint64_t b = (uint64_t)16 << 56;

    memcpy(m, key, 16);
    for (int i = 0; i < 2; i++) {
        v3 ^= m[i];
        LB_SIPROUND;
        v0 ^= m[i];
    }
    v3 ^= b;
    LB_SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    LB_SIPROUND;
    LB_SIPROUND;
    LB_SIPROUND;
    uint64_t h = v0 ^ v1 ^ v2 ^ v3;
    return (uint32_t)(h ^ (h >> 32));
}

/* The source sa stands for: an IPv4 address (native or mapped), or an IPv6
 * address cut to prefix bits. False for another family. */
static bool
lb_source_key(const struct sockaddr *sa, uint32_t ipv6_prefix, uint8_t key[16])
{
    bool known;
    bool is_v4 = lb_addr16(sa, key, &known);

    if (!known)
        return false;
    if (!is_v4) {
        /* Cut past the prefix. A cut address never looks mapped: that
         * takes its first 96 bits, kept only when prefix >= 96, and then
         * it was a mapped (IPv4) address to begin with. */
        unsigned bits = ipv6_prefix > 128 ? 128 : ipv6_prefix;
        unsigned whole = bits / 8, rest = bits % 8;
        if (rest != 0)
            key[whole++] &= (uint8_t)(0xff << (8 - rest));
        memset(key + whole, 0, 16 - whole);
    }
    return true;
}

/* The rate estimate of e at now_ms, times the period in ms (so that the
 * weighting needs no division and no rounding). Reading only: an entry
 * idle for two periods reads 0. */
static uint64_t
lb_source_rate(const struct lb_source *e, uint64_t now_ms)
{
    /* A worker whose clock is a little behind the one that started the
     * period: its start. */
    uint64_t age = now_ms > e->since_ms ? now_ms - e->since_ms : 0;
    uint64_t d = age / LB_SOURCE_PERIOD_MS, left = LB_SOURCE_PERIOD_MS - age % LB_SOURCE_PERIOD_MS;

    if (d >= 2)
        return 0;
    if (d == 1)
        return (uint64_t)e->cur * left;
    return (uint64_t)e->cur * LB_SOURCE_PERIOD_MS + (uint64_t)e->prev * left;
}

/* Moves e's window to now_ms's period, if that is later: by one period
 * (keeping the phase), or to a new first period starting now. */
static void
lb_source_roll(struct lb_source *e, uint64_t now_ms)
{
    if (now_ms < e->since_ms + LB_SOURCE_PERIOD_MS)
        return;
    if (now_ms < e->since_ms + 2 * LB_SOURCE_PERIOD_MS) {
        e->prev = e->cur;
        e->since_ms += LB_SOURCE_PERIOD_MS;
    } else {
        e->prev = 0;
        e->since_ms = now_ms;
    }
    e->cur = 0;
}

static void
lb_lru_unlink(struct lb_sources *t, uint32_t s)
{
    struct lb_source *e = &t->e[s];

    if (e->lru_prev != LB_SLOT_NIL)
        t->e[e->lru_prev].lru_next = e->lru_next;
    else
        t->lru_head = e->lru_next;
    if (e->lru_next != LB_SLOT_NIL)
        t->e[e->lru_next].lru_prev = e->lru_prev;
    else
        t->lru_tail = e->lru_prev;
    e->lru_prev = e->lru_next = LB_SLOT_NIL;
}

static void
lb_lru_push_head(struct lb_sources *t, uint32_t s)
{
    struct lb_source *e = &t->e[s];

    e->lru_prev = LB_SLOT_NIL;
    e->lru_next = t->lru_head;
    if (t->lru_head != LB_SLOT_NIL)
        t->e[t->lru_head].lru_prev = s;
    else
        t->lru_tail = s;
    t->lru_head = s;
}

static void
lb_lru_push_tail(struct lb_sources *t, uint32_t s)
{
    struct lb_source *e = &t->e[s];

    e->lru_next = LB_SLOT_NIL;
    e->lru_prev = t->lru_tail;
    if (t->lru_tail != LB_SLOT_NIL)
        t->e[t->lru_tail].lru_next = s;
    else
        t->lru_head = s;
    t->lru_tail = s;
}

static uint32_t
lb_sources_find(const struct lb_sources *t, const uint8_t key[16], uint32_t h)
{
    for (uint32_t s = t->buckets[h & (t->nbuckets - 1)]; s != LB_SLOT_NIL; s = t->e[s].hnext)
        if (memcmp(t->e[s].key, key, 16) == 0)
            return s;
    return LB_SLOT_NIL;
}

static void
lb_sources_hash_insert(struct lb_sources *t, uint32_t s, uint32_t h)
{
    uint32_t *b = &t->buckets[h & (t->nbuckets - 1)];

    t->e[s].hnext = *b;
    *b = s;
}

static void
lb_sources_hash_remove(struct lb_sources *t, uint32_t s)
{
    uint32_t *p = &t->buckets[lb_sources_hash(t, t->e[s].key) & (t->nbuckets - 1)];

    while (*p != s)
        p = &t->e[*p].hnext;
    *p = t->e[s].hnext;
}

/* Takes entry s out of the table (hash chain; the LRU list is the
 * caller's): its slot goes on the free list when below the size, and is
 * left out of it past the size (lb_sources_trim gives it back). */
static void
lb_sources_drop(struct lb_sources *t, uint32_t s)
{
    lb_sources_hash_remove(t, s);
    t->e[s].hnext = LB_SLOT_FREE;
    t->e[s].lru_prev = LB_SLOT_NIL;
    t->e[s].lru_next = LB_SLOT_NIL;
    if (s < t->size) {
        t->e[s].lru_next = t->free_head;
        t->free_head = s;
    }
    t->n--;
}

/* Rebuilds the buckets for alloc slots (a power of two at least as large,
 * so the chains average one entry or less). -1 when out of memory, with
 * the old buckets kept. */
static int
lb_sources_rehash(struct lb_sources *t)
{
    uint32_t nb = 8;

    while (nb < t->alloc)
        nb *= 2;
    uint32_t *b = malloc((size_t)nb * sizeof(*b));
    if (b == NULL)
        return -1;
    for (uint32_t i = 0; i < nb; i++)
        b[i] = LB_SLOT_NIL;
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
    for (uint32_t s = 0; s < t->used; s++)
        if (t->e[s].hnext != LB_SLOT_FREE)
            lb_sources_hash_insert(t, s, lb_sources_hash(t, t->e[s].key));
    return 0;
}

/* Makes room for at least one more slot, up to size: doubles the entries
 * (slots keep their index: realloc moves the block, not the order) and
 * the buckets with them. -1 when at size or out of memory. */
static int
lb_sources_grow(struct lb_sources *t)
{
    if (t->alloc >= t->size)
        return -1;
    uint32_t want = t->alloc < LB_SOURCES_MIN_ALLOC / 2 ? LB_SOURCES_MIN_ALLOC : t->alloc * 2;
    if (want > t->size || want < t->alloc)
        want = t->size;
    struct lb_source *e = realloc(t->e, (size_t)want * sizeof(*e));
    if (e == NULL)
        return -1;
    t->e = e;
    uint32_t old = t->alloc;
    t->alloc = want;
    if (want > t->nbuckets && lb_sources_rehash(t) < 0) {
        t->alloc = old;             /* the chains must cover every slot */
        return -1;
    }
    return 0;
}

/* Gives back the slots past the size at the top of the block once their
 * entries are gone, and the memory with them when the block is back
 * within the size (the end of a shrink that had to wait for connections
 * to close). */
static void
lb_sources_trim(struct lb_sources *t)
{
    while (t->used > t->size && t->e[t->used - 1].hnext == LB_SLOT_FREE)
        t->used--;
    if (t->alloc <= t->size || t->used > t->size)
        return;
    struct lb_source *e = realloc(t->e, (size_t)(t->size ? t->size : 1) * sizeof(*e));
    if (e == NULL)
        return;                     /* keeps the larger block: still valid */
    t->e = e;
    t->alloc = t->size;
    (void)lb_sources_rehash(t);     /* smaller buckets, or keep the old */
}

/* Moves entry s, past the size after a shrink and idle now, into a free
 * slot below it, so that the block can come back to the size without
 * forgetting the source; the new slot. There is one: n <= size with s
 * past it leaves a slot below the size free, and every free slot below
 * the size is on the free list. */
static uint32_t
lb_sources_relocate(struct lb_sources *t, uint32_t s)
{
    uint32_t d = t->free_head;

    t->free_head = t->e[d].lru_next;
    lb_sources_hash_remove(t, s);
    t->e[d] = t->e[s];
    lb_sources_hash_insert(t, d, lb_sources_hash(t, t->e[d].key));
    t->e[s].hnext = LB_SLOT_FREE;
    lb_sources_trim(t);             /* may move the block: d stays valid */
    return d;
}

/* A slot for a new entry: a free one, a new one, or the least recently
 * seen idle entry's (evicted). LB_SLOT_NIL when every entry holds a
 * connection (or memory ran out). */
static uint32_t
lb_sources_take_slot(struct lb_sources *t)
{
    if (t->n < t->size) {
        if (t->free_head != LB_SLOT_NIL) {
            uint32_t s = t->free_head;
            t->free_head = t->e[s].lru_next;
            t->n++;
            return s;
        }
        if (t->used < t->alloc || lb_sources_grow(t) == 0) {
            t->n++;
            return t->used++;
        }
    }
    uint32_t s = t->lru_tail;
    if (s == LB_SLOT_NIL)
        return LB_SLOT_NIL;
    lb_lru_unlink(t, s);
    lb_sources_hash_remove(t, s);
    t->evictions++;
    return s;
}

struct lb_sources *
lb_sources_new(uint32_t size)
{
    struct lb_sources *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    if (pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        return NULL;
    }
    t->size = size > LB_SOURCES_MAX_SIZE ? LB_SOURCES_MAX_SIZE : size;
    t->free_head = t->lru_head = t->lru_tail = LB_SLOT_NIL;
    if (getrandom(t->seed, sizeof(t->seed), GRND_NONBLOCK) != (ssize_t)sizeof(t->seed)) {
        /* Early boot with no entropy yet: a seed nobody outside can read
         * is still better than none. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t->seed[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)t;
        t->seed[1] = (uint64_t)ts.tv_sec * 0xc2b2ae3d27d4eb4fULL ^ (uint64_t)(uintptr_t)&ts;
    }
    if (lb_sources_rehash(t) < 0) {
        pthread_mutex_destroy(&t->lock);
        free(t);
        return NULL;
    }
    return t;
}

void
lb_sources_free(struct lb_sources *t)
{
    if (t == NULL)
        return;
    pthread_mutex_destroy(&t->lock);
    free(t->e);
    free(t->buckets);
    free(t);
}

/* Moves idle entry s to slot d (free, below the size): for a shrink, so
 * that the block can end at the new size. Only idle entries move: no
 * connection holds their slot. */
static void
lb_sources_move(struct lb_sources *t, uint32_t s, uint32_t d)
{
    struct lb_source *e = &t->e[s];

    t->e[d] = *e;
    if (e->lru_prev != LB_SLOT_NIL)
        t->e[e->lru_prev].lru_next = d;
    else
        t->lru_head = d;
    if (e->lru_next != LB_SLOT_NIL)
        t->e[e->lru_next].lru_prev = d;
    else
        t->lru_tail = d;
    e->hnext = LB_SLOT_FREE;        /* the chains are rebuilt after */
}

void
lb_sources_resize(struct lb_sources *t, uint32_t size)
{
    if (size > LB_SOURCES_MAX_SIZE)
        size = LB_SOURCES_MAX_SIZE;
    pthread_mutex_lock(&t->lock);
    t->size = size;

    /* The least recently seen idle entries go until the rest fits (or
     * only entries with connections open are left). */
    while (t->n > size && t->lru_tail != LB_SLOT_NIL) {
        uint32_t s = t->lru_tail;
        lb_lru_unlink(t, s);
        t->e[s].hnext = LB_SLOT_FREE;   /* the chains are rebuilt below */
        t->n--;
        t->evictions++;
    }
    /* Idle entries past the new size move into free slots below it: there
     * is room, as n <= size whenever an idle entry is left. */
    uint32_t d = 0;
    for (uint32_t s = size; s < t->used; s++) {
        if (t->e[s].hnext == LB_SLOT_FREE || t->e[s].open != 0)
            continue;
        while (t->e[d].hnext != LB_SLOT_FREE)
            d++;
        lb_sources_move(t, s, d);
    }
    /* The free list holds the free slots below the size, in order. */
    uint32_t top = t->used < size ? t->used : size;
    t->free_head = LB_SLOT_NIL;
    for (uint32_t s = top; s-- > 0;) {
        if (t->e[s].hnext == LB_SLOT_FREE) {
            t->e[s].lru_next = t->free_head;
            t->free_head = s;
        }
    }
    /* The block ends at the size, or after the last entry with a
     * connection open past it; a grow takes effect as sources come. */
    while (t->used > size && t->e[t->used - 1].hnext == LB_SLOT_FREE)
        t->used--;
    uint32_t keep = t->used > size ? t->used : (t->alloc < size ? t->alloc : size);
    if (keep < t->alloc) {
        struct lb_source *e = realloc(t->e, (size_t)(keep ? keep : 1) * sizeof(*e));
        if (e != NULL) {
            t->e = e;
            t->alloc = keep;
        }
    }
    if (lb_sources_rehash(t) < 0) {
        /* Out of memory for new buckets: the old ones (at least as many)
         * still fit, so chain the entries into them again. */
        for (uint32_t i = 0; i < t->nbuckets; i++)
            t->buckets[i] = LB_SLOT_NIL;
        for (uint32_t s = 0; s < t->used; s++)
            if (t->e[s].hnext != LB_SLOT_FREE)
                lb_sources_hash_insert(t, s, lb_sources_hash(t, t->e[s].key));
    }
    pthread_mutex_unlock(&t->lock);
}

enum lb_deny_reason
lb_sources_enter(struct lb_sources *t, const struct conf_frontend *fc,
                 const struct sockaddr *sa, uint64_t now_ms, struct lb_source_ref *ref)
{
    uint8_t key[16];
    enum lb_deny_reason r = LB_DENY_NONE;

    ref->slot = LB_SOURCE_UNTRACKED;
    if (!lb_source_key(sa, fc->source_ipv6_prefix, key))
        return LB_DENY_NONE;            /* no address to count by */
    uint32_t h = lb_sources_hash(t, key);

    pthread_mutex_lock(&t->lock);
    if (now_ms > t->now_ms)
        t->now_ms = now_ms;
    uint32_t s = lb_sources_find(t, key, h);
    if (s != LB_SLOT_NIL) {
        struct lb_source *e = &t->e[s];

        lb_source_roll(e, now_ms);
        if (fc->max_connections_per_source != 0 && e->open >= fc->max_connections_per_source)
            r = LB_DENY_PER_SOURCE;
        else if (fc->rate_per_source != 0 &&
                 lb_source_rate(e, now_ms) >=
                     (uint64_t)fc->rate_per_source * LB_SOURCE_PERIOD_MS)
            r = LB_DENY_RATE;
        if (e->open == 0)
            lb_lru_unlink(t, s);
        if (r != LB_DENY_NONE) {
            if (e->open == 0)
                lb_lru_push_head(t, s);     /* seen, though refused */
        } else {
            e->open++;
            if (e->cur != UINT32_MAX)
                e->cur++;
            ref->slot = s;
        }
    } else {
        /* A source not in the table has no connection open and no rate:
         * it is admitted under any limit of 1 or more. */
        s = lb_sources_take_slot(t);
        if (s == LB_SLOT_NIL) {
            t->untracked++;
        } else {
            struct lb_source *e = &t->e[s];

            memcpy(e->key, key, 16);
            e->lru_prev = e->lru_next = LB_SLOT_NIL;
            e->open = 1;
            e->since_ms = now_ms;
            e->cur = 1;
            e->prev = 0;
            lb_sources_hash_insert(t, s, h);
            ref->slot = s;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return r;
}

void
lb_sources_leave(struct lb_sources *t, struct lb_source_ref *ref)
{
    uint32_t s = ref->slot;

    if (s == LB_SOURCE_UNTRACKED)
        return;
    ref->slot = LB_SOURCE_UNTRACKED;
    pthread_mutex_lock(&t->lock);
    struct lb_source *e = &t->e[s];
    if (e->open > 0 && --e->open == 0) {
        if (t->n > t->size) {
            /* Kept past a shrink only for its connections. */
            lb_sources_drop(t, s);
            t->evictions++;
            lb_sources_trim(t);
        } else {
            if (s >= t->size)
                s = lb_sources_relocate(t, s);
            e = &t->e[s];
            if (lb_source_rate(e, t->now_ms) == 0) {
                /* Idle with no rate left to remember (it last connected
                 * two periods ago): the entry holds nothing, so it goes
                 * first. */
                lb_lru_push_tail(t, s);
            } else {
                /* Counted as seen now rather than at its last connect:
                 * within the two periods its rate lasts, the difference is
                 * at most how long the connection was open. */
                lb_lru_push_head(t, s);
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
}

int
lb_sources_check(struct lb_sources *t, char *err, size_t errlen)
{
    uint32_t live = 0, idle = 0, in_lru = 0, in_free = 0, in_chains = 0;
    int rc = -1;

    pthread_mutex_lock(&t->lock);
    if (t->used > t->alloc || t->alloc > t->nbuckets ||
        (t->nbuckets & (t->nbuckets - 1)) != 0) {
        snprintf(err, errlen, "used %u, alloc %u, buckets %u", t->used, t->alloc, t->nbuckets);
        goto out;
    }
    for (uint32_t s = 0; s < t->used; s++) {
        const struct lb_source *e = &t->e[s];
        if (e->hnext == LB_SLOT_FREE)
            continue;
        live++;
        if (e->open == 0) {
            idle++;
            if (s >= t->size) {
                snprintf(err, errlen, "idle entry %u past the size %u", s, t->size);
                goto out;
            }
        }
        if (lb_sources_find(t, e->key, lb_sources_hash(t, e->key)) != s) {
            snprintf(err, errlen, "entry %u not found by its key", s);
            goto out;
        }
    }
    for (uint32_t b = 0; b < t->nbuckets; b++)
        for (uint32_t s = t->buckets[b]; s != LB_SLOT_NIL && in_chains <= t->used;
             s = t->e[s].hnext)
            in_chains++;
    uint32_t prev = LB_SLOT_NIL;
    for (uint32_t s = t->lru_head; s != LB_SLOT_NIL && in_lru <= t->used; s = t->e[s].lru_next) {
        if (t->e[s].hnext == LB_SLOT_FREE || t->e[s].open != 0 || t->e[s].lru_prev != prev) {
            snprintf(err, errlen, "LRU entry %u: free, open or mislinked", s);
            goto out;
        }
        prev = s;
        in_lru++;
    }
    if (prev != t->lru_tail) {
        snprintf(err, errlen, "LRU tail %u, last %u", t->lru_tail, prev);
        goto out;
    }
    for (uint32_t s = t->free_head; s != LB_SLOT_NIL && in_free <= t->used; s = t->e[s].lru_next) {
        if (s >= t->used || s >= t->size || t->e[s].hnext != LB_SLOT_FREE) {
            snprintf(err, errlen, "free list slot %u: past used or the size, or in use", s);
            goto out;
        }
        in_free++;
    }
    uint32_t below = t->used < t->size ? t->used : t->size;
    uint32_t live_below = 0;
    for (uint32_t s = 0; s < below; s++)
        live_below += t->e[s].hnext != LB_SLOT_FREE;
    if (live != t->n || in_chains != live || in_lru != idle || in_free != below - live_below) {
        snprintf(err, errlen, "n %u: %u live, %u chained; %u idle, %u in the LRU; "
                 "%u free below the size, %u on the free list", t->n, live, in_chains, idle,
                 in_lru, below - live_below, in_free);
        goto out;
    }
    rc = 0;
out:
    pthread_mutex_unlock(&t->lock);
    return rc;
}

void
lb_sources_stats(struct lb_sources *t, struct lb_sources_stats *out)
{
    pthread_mutex_lock(&t->lock);
    out->entries = t->n;
    out->size = t->size;
    out->bytes = sizeof(*t) + (uint64_t)t->alloc * sizeof(struct lb_source) +
                 (uint64_t)t->nbuckets * sizeof(uint32_t);
    out->evictions = t->evictions;
    out->untracked = t->untracked;
    pthread_mutex_unlock(&t->lock);
}
