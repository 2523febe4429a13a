/* Tests lb/data/access.c: CIDR blocks match IPv4, IPv6 and IPv4-mapped
 * clients at any prefix; deny wins over allow, and allow alone refuses
 * the rest; the source table holds exactly max_connections_per_source
 * open per source, each source apart, IPv6 grouped by source_ipv6_prefix;
 * rate_per_source admits the rate over 5 s of a fake clock; the table
 * evicts its least recently seen idle entry at its size with memory flat,
 * lets a new source in untracked when every entry holds a connection, and
 * resizes both ways; and under threads the counts end at zero. Prints
 * the table's bytes per entry at 65536 and the cost of enter + leave. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "check.h"
#include "data.h"

static struct sockaddr_storage
addr(const char *text)
{
    struct sockaddr_storage ss;

    memset(&ss, 0, sizeof(ss));
    if (strchr(text, ':') != NULL) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        if (inet_pton(AF_INET6, text, &in6->sin6_addr) != 1)
            abort();
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        if (inet_pton(AF_INET, text, &in->sin_addr) != 1)
            abort();
    }
    return ss;
}

/* 10.x.y.z for source number i. */
static struct sockaddr_storage
addr_n(uint32_t i)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;

    memset(&ss, 0, sizeof(ss));
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(0x0a000000u | (i & 0xffffff));
    return ss;
}

#define SA(ss) ((const struct sockaddr *)&(ss))

/* The table's lists agree with its counts. */
#define CHECK_TABLE(t)                                                      \
    do {                                                                    \
        char check_err_[200];                                               \
        if (lb_sources_check((t), check_err_, sizeof(check_err_)) != 0) {   \
            fprintf(stderr, "%s:%d: table: %s\n", __FILE__, __LINE__, check_err_); \
            check_failures++;                                               \
        }                                                                   \
    } while (0)

/* Adds "ADDR/PREFIX" to l, as the parser would. */
static void
cidr_add(struct conf_cidrs *l, const char *text)
{
    char buf[64];
    struct conf_cidr *c = &l->v[l->n++];

    snprintf(buf, sizeof(buf), "%s", text);
    char *slash = strchr(buf, '/');
    *slash = '\0';
    memset(c, 0, sizeof(*c));
    c->prefix = (uint8_t)atoi(slash + 1);
    if (strchr(buf, ':') != NULL) {
        c->family = AF_INET6;
        inet_pton(AF_INET6, buf, c->addr);
    } else {
        c->family = AF_INET;
        inet_pton(AF_INET, buf, c->addr);
    }
}

static bool
match1(const char *cidr, const char *client)
{
    static struct conf_cidrs l;
    struct sockaddr_storage ss = addr(client);

    l.n = 0;
    cidr_add(&l, cidr);
    return lb_cidrs_match(&l, SA(ss));
}

static void
test_names(void)
{
    CHECK_EQ_STR(lb_deny_reason_name(LB_DENY_ACL), "acl");
    CHECK_EQ_STR(lb_deny_reason_name(LB_DENY_PER_SOURCE), "per_source_limit");
    CHECK_EQ_STR(lb_deny_reason_name(LB_DENY_RATE), "rate");
    CHECK_EQ_STR(lb_deny_reason_name(LB_DENY_REASONS), "unknown");
}

static void
test_cidrs(void)
{
    /* IPv4 */
    CHECK(match1("192.0.2.0/24", "192.0.2.255"));
    CHECK(!match1("192.0.2.0/24", "192.0.3.0"));
    CHECK(match1("192.0.2.7/32", "192.0.2.7"));
    CHECK(!match1("192.0.2.7/32", "192.0.2.6"));
    CHECK(match1("0.0.0.0/0", "203.0.113.9"));
    CHECK(!match1("0.0.0.0/0", "2001:db8::1"));
    /* odd prefixes: the partial byte */
    CHECK(match1("10.0.0.0/23", "10.0.1.200"));
    CHECK(!match1("10.0.0.0/23", "10.0.2.0"));
    CHECK(match1("10.0.0.128/25", "10.0.0.129"));
    CHECK(!match1("10.0.0.128/25", "10.0.0.127"));
    CHECK(match1("10.0.0.4/31", "10.0.0.5"));
    CHECK(!match1("10.0.0.4/31", "10.0.0.6"));
    CHECK(match1("128.0.0.0/1", "200.1.1.1"));
    CHECK(!match1("128.0.0.0/1", "127.1.1.1"));
    /* IPv6 */
    CHECK(match1("2001:db8::/32", "2001:db8:ffff::1"));
    CHECK(!match1("2001:db8::/32", "2001:db9::1"));
    CHECK(match1("::1/128", "::1"));
    CHECK(!match1("::1/128", "::2"));
    CHECK(match1("2001:db8:0:8000:8000::/65", "2001:db8:0:8000:ffff::1"));
    CHECK(!match1("2001:db8:0:8000:8000::/65", "2001:db8:0:8000:7fff::1"));
    CHECK(!match1("2001:db8:0:8000:8000::/65", "2001:db8:0:8001:8000::1"));
    CHECK(match1("2001:db8::/127", "2001:db8::1"));
    CHECK(!match1("2001:db8::/127", "2001:db8::2"));
    CHECK(match1("::/0", "2001:db8::1"));
    /* "::/0" is every IPv6 client, not every client */
    CHECK(!match1("::/0", "192.0.2.1"));
    CHECK(!match1("::/0", "::ffff:192.0.2.1"));
    /* IPv4-mapped clients match as IPv4, and never an IPv4 client an
     * IPv6 block outside ::ffff:0:0/96 */
    CHECK(match1("192.0.2.0/24", "::ffff:192.0.2.7"));
    CHECK(!match1("192.0.2.0/24", "::ffff:192.0.3.7"));
    CHECK(match1("0.0.0.0/0", "::ffff:1.2.3.4"));
    CHECK(!match1("192.0.2.0/24", "::c000:207"));    /* not mapped */
    CHECK(match1("::ffff:10.0.0.0/104", "10.1.2.3"));
    CHECK(!match1("::ffff:10.0.0.0/104", "11.1.2.3"));
    CHECK(!match1("2001:db8::/32", "192.0.2.1"));
    /* an empty list and a list of several */
    struct conf_cidrs l = { 0 };
    struct sockaddr_storage a = addr("198.51.100.1"), b = addr("2001:db8::5");
    CHECK(!lb_cidrs_match(&l, SA(a)));
    cidr_add(&l, "10.0.0.0/8");
    cidr_add(&l, "2001:db8::/64");
    cidr_add(&l, "198.51.100.0/24");
    CHECK(lb_cidrs_match(&l, SA(a)));
    CHECK(lb_cidrs_match(&l, SA(b)));
    /* a family with no address */
    struct sockaddr_storage u = { 0 };
    u.ss_family = AF_UNIX;
    CHECK(!lb_cidrs_match(&l, SA(u)));
}

static struct conf_frontend fc_zero;

static void
test_acl(void)
{
    struct conf_frontend fc = fc_zero;
    struct sockaddr_storage in_allow = addr("10.2.0.1"), in_deny = addr("10.1.0.1");
    struct sockaddr_storage outside = addr("11.0.0.1"), v6 = addr("2001:db8::1");

    CHECK_EQ_INT(lb_access_acl(&fc, SA(outside)), LB_DENY_NONE);    /* no lists */

    cidr_add(&fc.allow, "10.0.0.0/8");
    cidr_add(&fc.deny, "10.1.0.0/16");
    CHECK_EQ_INT(lb_access_acl(&fc, SA(in_allow)), LB_DENY_NONE);
    CHECK_EQ_INT(lb_access_acl(&fc, SA(in_deny)), LB_DENY_ACL);     /* deny wins */
    CHECK_EQ_INT(lb_access_acl(&fc, SA(outside)), LB_DENY_ACL);     /* not allowed */
    CHECK_EQ_INT(lb_access_acl(&fc, SA(v6)), LB_DENY_ACL);

    fc.deny.n = 0;                                                  /* allow only */
    CHECK_EQ_INT(lb_access_acl(&fc, SA(in_deny)), LB_DENY_NONE);
    CHECK_EQ_INT(lb_access_acl(&fc, SA(outside)), LB_DENY_ACL);

    fc.allow.n = 0;                                                 /* deny only */
    cidr_add(&fc.deny, "2001:db8::/32");
    CHECK_EQ_INT(lb_access_acl(&fc, SA(v6)), LB_DENY_ACL);
    CHECK_EQ_INT(lb_access_acl(&fc, SA(outside)), LB_DENY_NONE);
}

static void
test_per_source(void)
{
    struct conf_frontend fc = fc_zero;
    struct lb_sources *t = lb_sources_new(64);
    struct lb_source_ref a[10], b[10], extra;
    struct sockaddr_storage sa = addr("192.0.2.1"), sb = addr("192.0.2.2");

    fc.max_connections_per_source = 10;
    for (int i = 0; i < 10; i++)
        CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sa), 0, &a[i]), LB_DENY_NONE);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sa), 0, &extra), LB_DENY_PER_SOURCE);
    CHECK_EQ_INT(extra.slot, LB_SOURCE_UNTRACKED);
    /* another source has its own 10 */
    for (int i = 0; i < 10; i++)
        CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sb), 0, &b[i]), LB_DENY_NONE);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sb), 0, &extra), LB_DENY_PER_SOURCE);
    /* the mapped form is the same source */
    struct sockaddr_storage mapped = addr("::ffff:192.0.2.1");
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(mapped), 0, &extra), LB_DENY_PER_SOURCE);
    /* one closes: one more gets in, and only one */
    lb_sources_leave(t, &a[3]);
    CHECK_EQ_INT(a[3].slot, LB_SOURCE_UNTRACKED);
    lb_sources_leave(t, &a[3]);                     /* a second leave: nothing */
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sa), 1, &a[3]), LB_DENY_NONE);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sa), 1, &extra), LB_DENY_PER_SOURCE);
    /* a reload raising the limit applies to the next connection */
    fc.max_connections_per_source = 11;
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sa), 2, &extra), LB_DENY_NONE);
    lb_sources_leave(t, &extra);
    for (int i = 0; i < 10; i++) {
        lb_sources_leave(t, &a[i]);
        lb_sources_leave(t, &b[i]);
    }
    struct lb_sources_stats st;
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 2);
    CHECK_EQ_INT(st.size, 64);
    CHECK_EQ_INT(st.untracked, 0);
    CHECK_TABLE(t);
    lb_sources_free(t);
}

static void
test_ipv6_prefix(void)
{
    struct conf_frontend fc = fc_zero;
    struct lb_sources *t = lb_sources_new(64);
    struct lb_source_ref r1, r2, r3;
    struct sockaddr_storage a = addr("2001:db8:1:2::1"), b = addr("2001:db8:1:2:ffff::9");
    struct sockaddr_storage c = addr("2001:db8:1:3::1");

    fc.max_connections_per_source = 1;
    fc.source_ipv6_prefix = 64;
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(a), 0, &r1), LB_DENY_NONE);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(b), 0, &r2), LB_DENY_PER_SOURCE);  /* same /64 */
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(c), 0, &r3), LB_DENY_NONE);        /* next /64 */
    lb_sources_leave(t, &r1);
    lb_sources_leave(t, &r3);

    fc.source_ipv6_prefix = 128;
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(a), 0, &r1), LB_DENY_NONE);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(b), 0, &r2), LB_DENY_NONE);
    lb_sources_leave(t, &r1);
    lb_sources_leave(t, &r2);

    /* an odd prefix cuts inside a byte: /60 holds :2 and :f in the 4th group's top */
    fc.source_ipv6_prefix = 60;
    struct sockaddr_storage d = addr("2001:db8:1:0002::1"), e = addr("2001:db8:1:000f::1");
    struct sockaddr_storage g = addr("2001:db8:1:0010::1");
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(d), 0, &r1), LB_DENY_NONE);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(e), 0, &r2), LB_DENY_PER_SOURCE);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(g), 0, &r3), LB_DENY_NONE);
    lb_sources_leave(t, &r1);
    lb_sources_leave(t, &r3);
    CHECK_TABLE(t);
    lb_sources_free(t);
}

/* Attempts every 1 ms from one source for 5 s, from start_ms: what is
 * admitted (each closes at once). */
static int
rate_run(struct lb_sources *t, const struct conf_frontend *fc, const char *client,
         uint64_t start_ms)
{
    struct sockaddr_storage sa = addr(client);
    int admitted = 0;

    for (uint64_t ms = start_ms; ms < start_ms + 5000; ms++) {
        struct lb_source_ref r;
        if (lb_sources_enter(t, fc, SA(sa), ms, &r) == LB_DENY_NONE) {
            admitted++;
            lb_sources_leave(t, &r);
        }
    }
    return admitted;
}

static void
test_rate(void)
{
    struct conf_frontend fc = fc_zero;
    struct lb_sources *t = lb_sources_new(64);
    struct sockaddr_storage sa = addr("192.0.2.50");
    struct lb_source_ref r;

    fc.rate_per_source = 100;
    int n = rate_run(t, &fc, "192.0.2.1", 0);
    fprintf(stderr, "access_test: rate 100/s over 5 s admitted %d (aligned start)\n", n);
    CHECK(n >= 450 && n <= 550);
    n = rate_run(t, &fc, "192.0.2.2", 123457);
    fprintf(stderr, "access_test: rate 100/s over 5 s admitted %d (unaligned start)\n", n);
    CHECK(n >= 450 && n <= 550);
    fc.rate_per_source = 2000;      /* every attempt fits */
    CHECK_EQ_INT(rate_run(t, &fc, "192.0.2.3", 0), 5000);

    /* The window: a burst of 100 in the first period, then half-way
     * through the next one the previous count weighs half: 50 more. */
    fc.rate_per_source = 100;
    int burst = 0;
    while (lb_sources_enter(t, &fc, SA(sa), 10000, &r) == LB_DENY_NONE) {
        burst++;
        lb_sources_leave(t, &r);
    }
    CHECK_EQ_INT(burst, 100);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sa), 10999, &r), LB_DENY_RATE);
    burst = 0;
    while (lb_sources_enter(t, &fc, SA(sa), 11500, &r) == LB_DENY_NONE) {
        burst++;
        lb_sources_leave(t, &r);
    }
    CHECK_EQ_INT(burst, 50);
    /* refused attempts do not count: at 2/3 of the next period, a third of
     * the previous 50 weighs 16.65, so 84 more (the 84th sees 99.65) */
    burst = 0;
    while (lb_sources_enter(t, &fc, SA(sa), 12667, &r) == LB_DENY_NONE) {
        burst++;
        lb_sources_leave(t, &r);
    }
    CHECK_EQ_INT(burst, 84);
    /* unseen for more than 2 s: no rate left, a full burst */
    burst = 0;
    while (lb_sources_enter(t, &fc, SA(sa), 15001, &r) == LB_DENY_NONE) {
        burst++;
        lb_sources_leave(t, &r);
    }
    CHECK_EQ_INT(burst, 100);
    /* a worker whose clock is a little behind sees the same window */
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sa), 14999, &r), LB_DENY_RATE);

    /* both limits: the per-source cap first */
    fc.max_connections_per_source = 1;
    struct sockaddr_storage sb = addr("192.0.2.51");
    struct lb_source_ref r2;
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sb), 20000, &r), LB_DENY_NONE);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sb), 20000, &r2), LB_DENY_PER_SOURCE);
    lb_sources_leave(t, &r);
    CHECK_TABLE(t);
    lb_sources_free(t);
}

/* Enter and leave at once for sources first..first+count-1. */
static void
touch(struct lb_sources *t, const struct conf_frontend *fc, uint32_t first, uint32_t count,
      uint64_t now_ms)
{
    for (uint32_t i = first; i < first + count; i++) {
        struct sockaddr_storage sa = addr_n(i);
        struct lb_source_ref r;
        if (lb_sources_enter(t, fc, SA(sa), now_ms, &r) == LB_DENY_NONE)
            lb_sources_leave(t, &r);
    }
}

static enum lb_deny_reason
try1(struct lb_sources *t, const struct conf_frontend *fc, uint32_t i, uint64_t now_ms)
{
    struct sockaddr_storage sa = addr_n(i);
    struct lb_source_ref r;
    enum lb_deny_reason why = lb_sources_enter(t, fc, SA(sa), now_ms, &r);

    lb_sources_leave(t, &r);
    return why;
}

static void
test_eviction(void)
{
    struct conf_frontend fc = fc_zero;
    struct lb_sources *t = lb_sources_new(8);
    struct lb_sources_stats st;

    /* rate 1/s: a tracked source is refused again in the same second, an
     * evicted (forgotten) one is let in */
    fc.rate_per_source = 1;
    touch(t, &fc, 1, 8, 0);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 8);
    CHECK_EQ_INT(st.evictions, 0);
    uint64_t bytes_at_size = st.bytes;

    CHECK_EQ_INT(try1(t, &fc, 9, 0), LB_DENY_NONE);     /* evicts 1, the oldest */
    CHECK_EQ_INT(try1(t, &fc, 2, 0), LB_DENY_RATE);     /* 2 seen again */
    CHECK_EQ_INT(try1(t, &fc, 1, 0), LB_DENY_NONE);     /* forgotten; evicts 3 */
    CHECK_EQ_INT(try1(t, &fc, 2, 0), LB_DENY_RATE);     /* still there */
    CHECK_EQ_INT(try1(t, &fc, 3, 0), LB_DENY_NONE);     /* was evicted */
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 8);
    CHECK_EQ_INT(st.evictions, 3);

    /* an entry with a connection open is never evicted */
    struct sockaddr_storage held = addr_n(100);
    struct lb_source_ref hr, r;
    fc.max_connections_per_source = 1;
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(held), 0, &hr), LB_DENY_NONE);
    touch(t, &fc, 1000, 80, 5000);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(held), 5000, &r), LB_DENY_PER_SOURCE);
    lb_sources_leave(t, &hr);

    /* memory flat: 10 x size distinct sources hold what size did */
    touch(t, &fc, 2000, 80, 9000);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 8);
    CHECK_EQ_INT(st.bytes, bytes_at_size);
    CHECK_EQ_INT(st.untracked, 0);
    CHECK_TABLE(t);
    lb_sources_free(t);

    /* an idle entry with no rate left goes before one seen recently */
    t = lb_sources_new(2);
    fc.max_connections_per_source = 0;
    struct sockaddr_storage old = addr_n(1), recent = addr_n(2);
    struct lb_source_ref ro;
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(old), 0, &ro), LB_DENY_NONE);   /* long open */
    CHECK_EQ_INT(try1(t, &fc, 2, 4000), LB_DENY_NONE);
    (void)recent;
    /* 1 closes at 5 s, last admitted at 0: its rate is gone, it goes first */
    touch(t, &fc, 3, 1, 5000);                          /* advances the table's clock */
    lb_sources_leave(t, &ro);
    CHECK_EQ_INT(try1(t, &fc, 4, 5000), LB_DENY_NONE);  /* evicts 1, keeps 3 */
    CHECK_EQ_INT(try1(t, &fc, 3, 5000), LB_DENY_RATE);
    CHECK_TABLE(t);
    lb_sources_free(t);
}

static void
test_untracked(void)
{
    struct conf_frontend fc = fc_zero;
    struct lb_sources *t = lb_sources_new(4);
    struct lb_source_ref held[4], r, r2;
    struct lb_sources_stats st;

    fc.max_connections_per_source = 1;
    for (uint32_t i = 0; i < 4; i++) {
        struct sockaddr_storage sa = addr_n(i);
        CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sa), 0, &held[i]), LB_DENY_NONE);
    }
    /* full of open entries: a new source gets in, uncounted (twice over
     * its limit, as the table cannot count it) */
    struct sockaddr_storage sn = addr_n(50);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sn), 0, &r), LB_DENY_NONE);
    CHECK_EQ_INT(r.slot, LB_SOURCE_UNTRACKED);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sn), 0, &r2), LB_DENY_NONE);
    CHECK_EQ_INT(r2.slot, LB_SOURCE_UNTRACKED);
    lb_sources_leave(t, &r);
    lb_sources_leave(t, &r2);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.untracked, 2);
    CHECK_EQ_INT(st.entries, 4);
    CHECK_EQ_INT(st.evictions, 0);
    /* the held ones still count */
    struct sockaddr_storage s0 = addr_n(0);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(s0), 0, &r), LB_DENY_PER_SOURCE);
    /* one closes: the new source takes its place, tracked */
    lb_sources_leave(t, &held[2]);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sn), 0, &r), LB_DENY_NONE);
    CHECK(r.slot != LB_SOURCE_UNTRACKED);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sn), 0, &r2), LB_DENY_PER_SOURCE);
    lb_sources_leave(t, &r);
    for (int i = 0; i < 4; i++)
        lb_sources_leave(t, &held[i]);

    /* a table of size 0 tracks nothing and refuses no one */
    struct lb_sources *z = lb_sources_new(0);
    CHECK_EQ_INT(lb_sources_enter(z, &fc, SA(s0), 0, &r), LB_DENY_NONE);
    CHECK_EQ_INT(lb_sources_enter(z, &fc, SA(s0), 0, &r2), LB_DENY_NONE);
    lb_sources_leave(z, &r);
    lb_sources_leave(z, &r2);
    CHECK_TABLE(z);
    lb_sources_free(z);

    /* a family with no address is let in, uncounted */
    struct sockaddr_storage u = { 0 };
    u.ss_family = AF_UNIX;
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(u), 0, &r), LB_DENY_NONE);
    CHECK_EQ_INT(r.slot, LB_SOURCE_UNTRACKED);
    CHECK_TABLE(t);
    lb_sources_free(t);
}

static void
test_resize(void)
{
    struct conf_frontend fc = fc_zero;
    struct lb_sources *t = lb_sources_new(64);
    struct lb_sources_stats st, st4;

    /* what a table of 4 holds when full, for the shrinks to come back to */
    struct lb_sources *ref4 = lb_sources_new(4);
    fc.rate_per_source = 1;
    touch(ref4, &fc, 1, 4, 0);
    CHECK_TABLE(ref4);
    lb_sources_stats(ref4, &st4);
    CHECK_TABLE(ref4);
    lb_sources_free(ref4);

    /* shrink with every entry idle: the 4 most recent stay */
    touch(t, &fc, 1, 64, 0);
    lb_sources_resize(t, 4);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 4);
    CHECK_EQ_INT(st.size, 4);
    CHECK_EQ_INT(st.evictions, 60);
    CHECK_EQ_INT(st.bytes, st4.bytes);
    for (uint32_t i = 61; i <= 64; i++)
        CHECK_EQ_INT(try1(t, &fc, i, 0), LB_DENY_RATE);    /* kept, moved */
    CHECK_EQ_INT(try1(t, &fc, 60, 0), LB_DENY_NONE);        /* evicted */
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 4);

    /* grow: the table takes more sources as they come */
    lb_sources_resize(t, 32);
    touch(t, &fc, 100, 32, 0);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 32);
    CHECK(st.bytes > st4.bytes);

    /* shrink below the open entries: they stay, counted, until they close */
    struct lb_source_ref held[8];
    fc.max_connections_per_source = 1;
    for (uint32_t i = 0; i < 8; i++) {
        struct sockaddr_storage sa = addr_n(200 + i);
        CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sa), 3000, &held[i]), LB_DENY_NONE);
    }
    lb_sources_resize(t, 4);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 8);
    for (uint32_t i = 0; i < 8; i++)
        CHECK_EQ_INT(try1(t, &fc, 200 + i, 3000), LB_DENY_PER_SOURCE);
    /* a new source meanwhile: untracked, as every entry is open */
    struct lb_source_ref r;
    struct sockaddr_storage sn = addr_n(300);
    CHECK_EQ_INT(lb_sources_enter(t, &fc, SA(sn), 3000, &r), LB_DENY_NONE);
    CHECK_EQ_INT(r.slot, LB_SOURCE_UNTRACKED);
    for (uint32_t i = 0; i < 8; i++)
        lb_sources_leave(t, &held[i]);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 4);
    CHECK_EQ_INT(st.bytes, st4.bytes);      /* back to a table of 4 */
    /* and it works on: the four last to close are tracked, others come in */
    touch(t, &fc, 400, 40, 3000);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 4);
    CHECK_EQ_INT(st.bytes, st4.bytes);
    CHECK_EQ_INT(try1(t, &fc, 439, 3000), LB_DENY_RATE);

    /* shrink to 0 and back */
    lb_sources_resize(t, 0);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 0);
    lb_sources_resize(t, 16);
    touch(t, &fc, 500, 16, 3000);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 16);
    CHECK_EQ_INT(try1(t, &fc, 500, 3000), LB_DENY_RATE);
    CHECK_TABLE(t);
    lb_sources_free(t);
}

/* ----------------------------------------------------------- threads */

#define THREADS 4
#define THREAD_ROUNDS 20000
#define THREAD_SOURCES 48
#define THREAD_HOLD 3

struct thread_arg {
    struct lb_sources *t;
    const struct conf_frontend *fc;
    unsigned seed;
    long refused;
};

static void *
thread_run(void *p)
{
    struct thread_arg *a = p;
    struct lb_source_ref held[THREAD_HOLD];

    for (int i = 0; i < THREAD_HOLD; i++)
        held[i].slot = LB_SOURCE_UNTRACKED;
    for (int round = 0; round < THREAD_ROUNDS; round++) {
        /* each thread holds a few connections at a time, closing the
         * oldest before opening the next */
        int k = round % THREAD_HOLD;
        lb_sources_leave(a->t, &held[k]);
        struct sockaddr_storage sa = addr_n((unsigned)rand_r(&a->seed) % THREAD_SOURCES);
        if (lb_sources_enter(a->t, a->fc, SA(sa), (uint64_t)round, &held[k]) != LB_DENY_NONE)
            a->refused++;
        if (round % 1000 == 0 && a->seed == 1)
            CHECK_TABLE(a->t);
        if (round % 5000 == 0 && a->seed % 2 == 0)
            lb_sources_resize(a->t, round % 10000 == 0 ? 40 : 6);
    }
    for (int i = 0; i < THREAD_HOLD; i++)
        lb_sources_leave(a->t, &held[i]);
    return NULL;
}

static void
test_threads(void)
{
    struct conf_frontend fc = fc_zero;
    /* fewer entries than sources: evictions, untracked and shrinks race
     * with the counts */
    struct lb_sources *t = lb_sources_new(16);
    pthread_t th[THREADS];
    struct thread_arg a[THREADS];

    fc.max_connections_per_source = 4;
    fc.rate_per_source = 1000000;
    for (int i = 0; i < THREADS; i++) {
        a[i] = (struct thread_arg){ .t = t, .fc = &fc, .seed = (unsigned)i + 1 };
        if (pthread_create(&th[i], NULL, thread_run, &a[i]) != 0)
            abort();
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);

    /* every count back at zero: each source takes exactly its limit again */
    lb_sources_resize(t, THREAD_SOURCES);
    for (uint32_t s = 0; s < THREAD_SOURCES; s++) {
        struct sockaddr_storage sa = addr_n(s);
        struct lb_source_ref r[5];
        int in = 0;
        for (int i = 0; i < 5; i++)
            if (lb_sources_enter(t, &fc, SA(sa), 1000000, &r[i]) == LB_DENY_NONE)
                in++;
        CHECK_EQ_INT(in, 4);
        for (int i = 0; i < 5; i++)
            if (i < in)
                lb_sources_leave(t, &r[i]);
    }
    struct lb_sources_stats st;
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK(st.entries <= THREAD_SOURCES);
    fprintf(stderr, "access_test: threads: %llu evictions, %llu untracked\n",
            (unsigned long long)st.evictions, (unsigned long long)st.untracked);
    CHECK_TABLE(t);
    lb_sources_free(t);
}

/* ----------------------------------------------------------- figures */

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
test_figures(void)
{
    struct conf_frontend fc = fc_zero;
    struct lb_sources *t = lb_sources_new(65536);
    struct lb_sources_stats st;

    fc.rate_per_source = 100;
    fc.max_connections_per_source = 100;
    touch(t, &fc, 0, 10, 0);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    uint64_t bytes10 = st.bytes;
    touch(t, &fc, 0, 65536, 0);
    CHECK_TABLE(t);
    lb_sources_stats(t, &st);
    CHECK_EQ_INT(st.entries, 65536);
    CHECK(bytes10 < 4096);                  /* grows with the sources seen */
    CHECK(st.bytes <= 52 * 65536 + 4096);
    fprintf(stderr, "access_test: 10 sources: %llu bytes; 65536 sources: %llu bytes, "
            "%.2f bytes per entry\n", (unsigned long long)bytes10,
            (unsigned long long)st.bytes, (double)st.bytes / 65536);
    touch(t, &fc, 65536, 10 * 65536, 5000);
    struct lb_sources_stats st2;
    CHECK_TABLE(t);
    lb_sources_stats(t, &st2);
    CHECK_EQ_INT(st2.bytes, st.bytes);

    /* enter + leave, uncounted by any limit, over sources in the table */
    enum { PAIRS = 2000000 };
    struct sockaddr_storage sa[1024];
    for (uint32_t i = 0; i < 1024; i++)
        sa[i] = addr_n(i * 61);
    fc.rate_per_source = 0;
    double t0 = now_s();
    for (uint32_t i = 0; i < PAIRS; i++) {
        struct lb_source_ref r;
        if (lb_sources_enter(t, &fc, SA(sa[i & 1023]), 10000 + i / 1000, &r) == LB_DENY_NONE)
            lb_sources_leave(t, &r);
    }
    double dt = now_s() - t0;
    fprintf(stderr, "access_test: enter + leave: %.0f ns a pair (uncontended)\n",
            dt / PAIRS * 1e9);
    CHECK_TABLE(t);
    lb_sources_free(t);
}

int
main(void)
{
    test_names();
    test_cidrs();
    test_acl();
    test_per_source();
    test_ipv6_prefix();
    test_rate();
    test_eviction();
    test_untracked();
    test_resize();
    test_threads();
    test_figures();
    return CHECK_DONE();
}
