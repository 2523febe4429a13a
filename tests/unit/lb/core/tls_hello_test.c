/* Tests lb/core/tls_hello.c: the SNI reader on ClientHellos that
 * openssl s_client sent (TLS 1.3, TLS 1.2, none), the same re-framed
 * into more records, each way of not being a routable hello with the
 * reason it gives, the cap, and on every input: every prefix answers 0
 * (wanting more than it has, no more than the cap) or exactly what the
 * whole does, and a hello that comes a byte at a time is read only about
 * once a field. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "core.h"

/* The first flights of `openssl s_client -connect 127.0.0.1:PORT` (OpenSSL
 * 3.0) as a Python listener received them: with -servername
 * Api.Example.COM. -tls1_3, the same with -tls1_2, and -noservername
 * -tls1_3. OpenSSL sends server_name first: at offset 90, name at 99. */
static const uint8_t hello_tls13[250] = {
    0x16, 0x03, 0x01, 0x00, 0xf5, 0x01, 0x00, 0x00, 0xf1, 0x03, 0x03, 0xd5,
    0x38, 0x30, 0xd2, 0x1d, 0x32, 0x43, 0x43, 0x16, 0x6c, 0x10, 0x9e, 0xa3,
    0xf7, 0xce, 0xd7, 0x08, 0xc2, 0xcb, 0x2a, 0xf9, 0x56, 0x7e, 0x0d, 0x52,
    0xee, 0xa2, 0xdc, 0x0a, 0xb9, 0x11, 0x80, 0x20, 0xe0, 0x9d, 0x43, 0xee,
    0xde, 0xc4, 0x42, 0x96, 0x15, 0x85, 0xa1, 0x63, 0x51, 0x46, 0x32, 0x32,
    0x8c, 0xc9, 0x39, 0x9b, 0xbf, 0xc5, 0x62, 0xf1, 0x51, 0xc9, 0x16, 0x25,
    0x61, 0x5e, 0xd4, 0xd5, 0x00, 0x08, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
    0x00, 0xff, 0x01, 0x00, 0x00, 0xa0, 0x00, 0x00, 0x00, 0x15, 0x00, 0x13,
    0x00, 0x00, 0x10, 0x41, 0x70, 0x69, 0x2e, 0x45, 0x78, 0x61, 0x6d, 0x70,
    0x6c, 0x65, 0x2e, 0x43, 0x4f, 0x4d, 0x2e, 0x00, 0x0b, 0x00, 0x04, 0x03,
    0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00,
    0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01,
    0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00,
    0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x1e, 0x00, 0x1c, 0x04,
    0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08,
    0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05,
    0x01, 0x06, 0x01, 0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04, 0x00, 0x2d,
    0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d,
    0x00, 0x20, 0x24, 0x7b, 0xb9, 0xc0, 0x47, 0x72, 0xa4, 0xb9, 0x7d, 0xe2,
    0x5d, 0x10, 0xae, 0xc9, 0xec, 0xcc, 0x7b, 0x3e, 0x43, 0xcd, 0xcd, 0x2e,
    0x33, 0xda, 0x6b, 0x2d, 0x3c, 0xd0, 0xe9, 0x4e, 0x09, 0x7d,
};
static const uint8_t hello_tls12[213] = {
    0x16, 0x03, 0x01, 0x00, 0xd0, 0x01, 0x00, 0x00, 0xcc, 0x03, 0x03, 0x87,
    0xcc, 0x0b, 0x60, 0x7b, 0xee, 0xf5, 0x44, 0x5f, 0xb3, 0xde, 0x21, 0x5f,
    0xd1, 0xea, 0x70, 0x89, 0x55, 0x24, 0xfc, 0xfe, 0x0e, 0x10, 0x0e, 0x4b,
    0xce, 0xc2, 0x7d, 0xd3, 0x76, 0x02, 0xf7, 0x00, 0x00, 0x38, 0xc0, 0x2c,
    0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b,
    0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23,
    0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09,
    0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c,
    0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0x6b, 0x00, 0x00,
    0x00, 0x15, 0x00, 0x13, 0x00, 0x00, 0x10, 0x41, 0x70, 0x69, 0x2e, 0x45,
    0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x43, 0x4f, 0x4d, 0x2e, 0x00,
    0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x0c, 0x00,
    0x0a, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x00,
    0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00,
    0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08,
    0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08,
    0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03,
    0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02,
};
static const uint8_t hello_nosni[225] = {
    0x16, 0x03, 0x01, 0x00, 0xdc, 0x01, 0x00, 0x00, 0xd8, 0x03, 0x03, 0x1e,
    0xfb, 0x21, 0x40, 0xc3, 0x35, 0xbe, 0x7f, 0xbe, 0x97, 0x4a, 0x51, 0x76,
    0x9c, 0x81, 0xb4, 0xcd, 0x1a, 0xe7, 0xa4, 0x95, 0xb1, 0x4e, 0x6b, 0xe6,
    0x14, 0x5d, 0xf8, 0xc3, 0x61, 0xcb, 0x1f, 0x20, 0xd5, 0x78, 0xb5, 0x0b,
    0xa8, 0x9a, 0xa7, 0x64, 0x56, 0xe3, 0x93, 0x48, 0x19, 0xcb, 0xa1, 0x33,
    0x21, 0x4d, 0xae, 0xfa, 0xdb, 0x49, 0x22, 0xc3, 0x7f, 0x1d, 0x81, 0xb9,
    0x7d, 0x19, 0x95, 0x2f, 0x00, 0x08, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
    0x00, 0xff, 0x01, 0x00, 0x00, 0x87, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00,
    0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17,
    0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02,
    0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00,
    0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x1e, 0x00, 0x1c, 0x04, 0x03,
    0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a,
    0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01,
    0x06, 0x01, 0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04, 0x00, 0x2d, 0x00,
    0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00,
    0x20, 0x7b, 0x3a, 0xab, 0x66, 0x36, 0xc6, 0x04, 0x23, 0x8e, 0xdf, 0xb9,
    0x38, 0x84, 0xc1, 0x45, 0x96, 0xf4, 0xa5, 0x0c, 0x28, 0xd9, 0xac, 0xc2,
    0x89, 0x60, 0x84, 0x99, 0x94, 0xe2, 0x71, 0x30, 0x33,
};
#define TLS13_SNI_END 115           /* where its server_name extension ends */
#define BIG 65536                   /* sni_max_bytes's highest */

/* ------------------------------------------------------------ asking */

struct answer {
    int rc;
    char name[LB_SNI_NAME_MAX + 1];
    size_t need;
    enum lb_sni_bad bad;
};

/* What the reader answers, with name, need and bad preset to values that
 * show whether it wrote them. */
static struct answer
ask(const uint8_t *buf, size_t len, size_t max)
{
    struct answer a;

    memset(a.name, '#', sizeof(a.name));
    a.name[LB_SNI_NAME_MAX] = '\0';
    a.need = 0;
    a.bad = LB_SNI_BADS;
    a.rc = lb_hello_sni(buf, len, max, a.name, &a.need, &a.bad);
    return a;
}

static bool
is_untouched_name(const char *name)
{
    return name[0] == '#' && strlen(name) == LB_SNI_NAME_MAX;
}

/* Only the answer's own outputs were written. */
static void
check_outputs(const struct answer *a, size_t len, size_t max)
{
    CHECK(a->rc >= -1 && a->rc <= 1);
    if (a->rc == 0) {
        CHECK(a->need > len && a->need <= max);
        CHECK(is_untouched_name(a->name) && a->bad == LB_SNI_BADS);
    } else if (a->rc == -1) {
        CHECK(a->bad == LB_SNI_NOT_TLS || a->bad == LB_SNI_MALFORMED ||
              a->bad == LB_SNI_TOO_LONG);
        CHECK(is_untouched_name(a->name) && a->need == 0);
    } else {
        CHECK(strlen(a->name) <= LB_SNI_NAME_MAX && a->need == 0 && a->bad == LB_SNI_BADS);
    }
}

static bool
is_same(const struct answer *a, const struct answer *b)
{
    return a->rc == b->rc && (a->rc != 1 || strcmp(a->name, b->name) == 0) &&
           (a->rc != -1 || a->bad == b->bad);
}

/* Every prefix of buf answers 0 or exactly what the whole does, and asking
 * again once need bytes are there goes further. */
static void
check_prefixes(const uint8_t *buf, size_t len, size_t max)
{
    struct answer w = ask(buf, len, max);

    check_outputs(&w, len, max);
    for (size_t k = 0; k < len; k++) {
        struct answer p = ask(buf, k, max);

        check_outputs(&p, k, max);
        if (p.rc != 0) {
            CHECK(is_same(&p, &w));
            continue;
        }
        if (p.need <= len) {
            struct answer q = ask(buf, p.need, max);

            CHECK(q.rc != 0 || q.need > p.need);
        }
    }
}

/* Asks with the prefixes checked. */
static struct answer
sni(const uint8_t *buf, size_t len, size_t max)
{
    check_prefixes(buf, len, max);
    return ask(buf, len, max);
}

static bool
is_name(const uint8_t *buf, size_t len, size_t max, const char *name)
{
    struct answer a = sni(buf, len, max);

    if (a.rc != 1 || strcmp(a.name, name) != 0) {
        fprintf(stderr, "  got rc %d name \"%s\" bad %s, want \"%s\"\n", a.rc,
                a.rc == 1 ? a.name : "", lb_sni_bad_name(a.bad), name);
        return false;
    }
    return true;
}

static bool
is_bad(const uint8_t *buf, size_t len, size_t max, enum lb_sni_bad why)
{
    struct answer a = sni(buf, len, max);

    if (a.rc != -1 || a.bad != why) {
        fprintf(stderr, "  got rc %d bad %s need %zu, want %s\n", a.rc, lb_sni_bad_name(a.bad),
                a.need, lb_sni_bad_name(why));
        return false;
    }
    return true;
}

static bool
is_more(const uint8_t *buf, size_t len, size_t max, size_t need)
{
    struct answer a = sni(buf, len, max);

    if (a.rc != 0 || a.need != need) {
        fprintf(stderr, "  got rc %d need %zu bad %s, want need %zu\n", a.rc, a.need,
                lb_sni_bad_name(a.bad), need);
        return false;
    }
    return true;
}

/* Macros, so that a failure names the case's line. */
#define expect_name(buf, len, max, name) CHECK(is_name(buf, len, max, name))
#define expect_bad(buf, len, max, why) CHECK(is_bad(buf, len, max, why))
#define expect_more(buf, len, max, need) CHECK(is_more(buf, len, max, need))

/* How many times a session reads a hello that comes a byte at a time: it
 * asks at 0 bytes, then again only once need bytes came. */
static size_t
reads_byte_by_byte(const uint8_t *buf, size_t len, size_t max, struct answer *last)
{
    size_t have = 0, reads = 0;

    for (;;) {
        reads++;
        *last = ask(buf, have, max);
        if (last->rc != 0 || last->need > len)
            return reads;
        have = last->need;
    }
}

/* ---------------------------------------------------------- building */

/* A stream being built. */
struct msg {
    uint8_t b[2 * BIG];
    size_t n;
};

static void
put(struct msg *m, const void *p, size_t n)
{
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

static void
put8(struct msg *m, size_t v)
{
    m->b[m->n++] = (uint8_t)v;
}

static void
put16(struct msg *m, size_t v)
{
    put8(m, v >> 8);
    put8(m, v);
}

static void
put24(struct msg *m, size_t v)
{
    put8(m, v >> 16);
    put16(m, v);
}

/* A server_name extension of one entry of name_type type. */
static void
put_sni(struct msg *m, size_t type, const char *name, size_t n)
{
    put16(m, 0);
    put16(m, n + 5);
    put16(m, n + 3);
    put8(m, type);
    put16(m, n);
    put(m, name, n);
}

/* Offsets in a hello_hs() message, and +5 in its one record. */
#define HS_SID_LEN 38
#define HS_CS_LEN 71
#define HS_COMP_LEN 77
#define HS_EXT_LEN 79
#define HS_EXTS 81

/* A ClientHello handshake message: a 32-byte session id, two cipher
 * suites, the null compression method, and exts (n bytes) as its
 * extensions block; exts NULL: no block at all. */
static void
hello_hs(struct msg *m, const uint8_t *exts, size_t n)
{
    static const uint8_t random[32] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    size_t body = 2 + 32 + 1 + 32 + 2 + 4 + 1 + 1 + (exts != NULL ? 2 + n : 0);

    m->n = 0;
    put8(m, 1);
    put24(m, body);
    put16(m, 0x0303);
    put(m, random, 32);
    put8(m, 32);
    put(m, random, 32);
    put16(m, 4);
    put16(m, 0x1301);
    put16(m, 0x1302);
    put8(m, 1);
    put8(m, 0);
    if (exts != NULL) {
        put16(m, n);
        put(m, exts, n);
    }
}

/* The handshake bytes hs as records of at most each bytes of fragment
 * (the last one may be shorter). */
static void
frame(struct msg *out, const uint8_t *hs, size_t n, size_t each)
{
    out->n = 0;
    for (size_t off = 0; off < n; off += each) {
        size_t k = n - off < each ? n - off : each;

        put8(out, 22);
        put16(out, 0x0301);
        put16(out, k);
        put(out, hs + off, k);
    }
}

/* The same in two records, the first of cut bytes. */
static void
frame2(struct msg *out, const uint8_t *hs, size_t n, size_t cut)
{
    struct msg tail;

    frame(out, hs, cut, cut);
    frame(&tail, hs + cut, n - cut, n - cut);
    put(out, tail.b, tail.n);
}

/* The handshake bytes of a one-record hello (a captured one). */
static void
unframe(struct msg *hs, const uint8_t *rec, size_t n)
{
    hs->n = 0;
    put(hs, rec + 5, n - 5);
}

/* A one-record hello whose extensions are one server_name of name. */
static void
hello_named(struct msg *out, const char *name, size_t n)
{
    struct msg ext, hs;

    ext.n = 0;
    put_sni(&ext, 0, name, n);
    hello_hs(&hs, ext.b, ext.n);
    frame(out, hs.b, hs.n, hs.n);
}

/* ------------------------------------------------------------- tests */

static void
test_captured(void)
{
    struct answer last;
    size_t reads;

    expect_name(hello_tls13, sizeof(hello_tls13), BIG, "api.example.com");
    expect_name(hello_tls12, sizeof(hello_tls12), BIG, "api.example.com");
    expect_name(hello_nosni, sizeof(hello_nosni), BIG, "");
    /* The default cap, and one that holds exactly the hello. */
    expect_name(hello_tls13, sizeof(hello_tls13), 16384, "api.example.com");
    expect_name(hello_tls13, sizeof(hello_tls13), sizeof(hello_tls13), "api.example.com");
    /* Every prefix waits: none of them can be refused. */
    for (size_t k = 0; k < TLS13_SNI_END; k++) {
        struct answer a = ask(hello_tls13, k, BIG);

        CHECK_EQ_INT(a.rc, 0);
    }
    /* The walk stops at the end of server_name: the bytes after it are
     * not waited for. */
    expect_name(hello_tls13, TLS13_SNI_END, BIG, "api.example.com");
    expect_more(hello_tls13, TLS13_SNI_END - 1, BIG, TLS13_SNI_END);
    /* A byte at a time: read once a field, not once a byte. */
    reads = reads_byte_by_byte(hello_tls13, sizeof(hello_tls13), BIG, &last);
    fprintf(stderr, "tls_hello_test: TLS 1.3 hello a byte at a time: %zu reads for %d bytes\n",
            reads, TLS13_SNI_END);
    CHECK_EQ_INT(last.rc, 1);
    CHECK(reads <= 24);
    reads = reads_byte_by_byte(hello_nosni, sizeof(hello_nosni), BIG, &last);
    fprintf(stderr, "tls_hello_test: no-SNI hello a byte at a time: %zu reads for %zu bytes\n",
            reads, sizeof(hello_nosni));
    CHECK_EQ_INT(last.rc, 1);
    CHECK(reads <= 40);
    /* The fields' ends, from the first: header, type, length, version and
     * random, session id's length, session id, ... */
    expect_more(hello_tls13, 0, BIG, 5);
    expect_more(hello_tls13, 3, BIG, 5);
    expect_more(hello_tls13, 5, BIG, 6);
    expect_more(hello_tls13, 6, BIG, 9);
    expect_more(hello_tls13, 9, BIG, 43);
    expect_more(hello_tls13, 43, BIG, 44);
    expect_more(hello_tls13, 44, BIG, 76);
    expect_more(hello_tls13, 90, BIG, 94);
    expect_more(hello_tls13, 99, BIG, TLS13_SNI_END);
    /* Bytes past the cap are not looked at. */
    {
        struct msg m;

        m.n = 0;
        put(&m, hello_tls13, sizeof(hello_tls13));
        put(&m, "\x17\x03\x03\x00\x00garbage", 12);
        expect_name(m.b, m.n, sizeof(hello_tls13), "api.example.com");
        expect_name(m.b, m.n, BIG, "api.example.com");
    }
}

/* The captured hellos re-framed: in two records cut at every offset, and
 * in records of 1, 2, 3, 7 and 100 bytes. */
static void
test_records(void)
{
    static const struct { const uint8_t *rec; size_t n; const char *name; } hellos[] = {
        { hello_tls13, sizeof(hello_tls13), "api.example.com" },
        { hello_tls12, sizeof(hello_tls12), "api.example.com" },
        { hello_nosni, sizeof(hello_nosni), "" },
    };
    static const size_t each[] = { 1, 2, 3, 7, 100 };
    struct msg hs, m;

    for (size_t h = 0; h < sizeof(hellos) / sizeof(hellos[0]); h++) {
        unframe(&hs, hellos[h].rec, hellos[h].n);
        for (size_t cut = 1; cut < hs.n; cut++) {
            frame2(&m, hs.b, hs.n, cut);
            expect_name(m.b, m.n, BIG, hellos[h].name);
        }
        for (size_t e = 0; e < sizeof(each) / sizeof(each[0]); e++) {
            struct answer last;
            size_t reads;

            frame(&m, hs.b, hs.n, each[e]);
            expect_name(m.b, m.n, BIG, hellos[h].name);
            /* A read per record at worst, plus one per field. */
            reads = reads_byte_by_byte(m.b, m.n, BIG, &last);
            CHECK_EQ_INT(last.rc, 1);
            CHECK(reads <= 2 * (m.n / (each[e] + 5) + 1) + 40);
        }
    }
    /* A record in the middle that is not handshake: an alert, application
     * data, change_cipher_spec; or of another major version. */
    unframe(&hs, hello_tls13, sizeof(hello_tls13));
    frame2(&m, hs.b, hs.n, 50);
    for (size_t i = 0; i < 4; i++) {
        static const uint8_t types[] = { 0x15, 0x17, 0x14, 0x16 };

        m.b[5 + 50] = types[i];
        m.b[5 + 50 + 1] = i == 3 ? 2 : 3;
        expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
        expect_bad(m.b, 5 + 50 + 2, BIG, LB_SNI_MALFORMED);
    }
    /* Its minor version is not judged. */
    frame2(&m, hs.b, hs.n, 50);
    m.b[5 + 50 + 2] = 0x7f;
    expect_name(m.b, m.n, BIG, "api.example.com");
    /* A second record of length 0, or past 2^14. */
    frame2(&m, hs.b, hs.n, 50);
    m.b[5 + 50 + 3] = 0;
    m.b[5 + 50 + 4] = 0;
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
    m.b[5 + 50 + 3] = 0x40;
    m.b[5 + 50 + 4] = 0x01;
    expect_bad(m.b, 5 + 50 + 5, BIG, LB_SNI_MALFORMED);
}

static void
test_not_tls(void)
{
    static const char *const texts[] = {
        "GET / HTTP/1.1\r\n", "G", "SSH-2.0-OpenSSH_9.6\r\n", "\x15\x03\x01\x00\x02\x02\x28",
        "\x17\x03\x03\x00\x10", "\x16\x02", "\x16\x04\x01",
    };
    uint8_t b[sizeof(hello_tls13)];

    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        expect_bad((const uint8_t *)texts[i], strlen(texts[i]) ? strlen(texts[i]) : 1, BIG,
                   LB_SNI_NOT_TLS);
    /* Major version 0, refused at its byte. */
    expect_bad((const uint8_t *)"\x16\x00\x02\x00\x10", 5, BIG, LB_SNI_NOT_TLS);
    expect_bad((const uint8_t *)"\x16\x00", 2, BIG, LB_SNI_NOT_TLS);
    /* An SSLv2-style hello: a 2-byte length with the high bit set. */
    expect_bad((const uint8_t *)"\x80\x2e\x01\x00\x02", 5, BIG, LB_SNI_NOT_TLS);
    expect_bad((const uint8_t *)"\x80", 1, BIG, LB_SNI_NOT_TLS);
    /* A handshake record that opens with another message: ServerHello,
     * Certificate, HelloRequest. Refused at the type's byte. */
    for (size_t i = 0; i < 3; i++) {
        static const uint8_t types[] = { 2, 11, 0 };

        memcpy(b, hello_tls13, sizeof(b));
        b[5] = types[i];
        expect_bad(b, sizeof(b), BIG, LB_SNI_NOT_TLS);
        expect_bad(b, 6, BIG, LB_SNI_NOT_TLS);
    }
    /* What may still become a hello waits. */
    expect_more((const uint8_t *)"\x16", 1, BIG, 5);
    expect_more((const uint8_t *)"\x16\x03\x00\x00", 4, BIG, 5);
}

static void
test_malformed_fields(void)
{
    struct msg m;

    /* A first record of length 0, and one past the 2^14 of TLSPlaintext
     * (the TLS 1.2 ciphertext bound, 2^14 + 2048, too); 2^14 is taken. */
    expect_bad((const uint8_t *)"\x16\x03\x01\x00\x00", 5, BIG, LB_SNI_MALFORMED);
    expect_bad((const uint8_t *)"\x16\x03\x01\x40\x01", 5, BIG, LB_SNI_MALFORMED);
    expect_bad((const uint8_t *)"\x16\x03\x01\x48\x01", 5, BIG, LB_SNI_MALFORMED);
    expect_bad((const uint8_t *)"\x16\x03\x01\xff\xff", 5, BIG, LB_SNI_MALFORMED);
    expect_more((const uint8_t *)"\x16\x03\x01\x40\x00", 5, BIG, 6);

    /* Each length of the hello's fields, wrong, refused at that length. */
    hello_named(&m, "a.example", 9);
    expect_name(m.b, m.n, BIG, "a.example");
    m.b[5 + HS_SID_LEN] = 33;
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
    expect_bad(m.b, 5 + HS_SID_LEN + 1, BIG, LB_SNI_MALFORMED);

    hello_named(&m, "a.example", 9);
    m.b[5 + HS_CS_LEN + 1] = 3;                     /* odd */
    expect_bad(m.b, 5 + HS_CS_LEN + 2, BIG, LB_SNI_MALFORMED);
    m.b[5 + HS_CS_LEN + 1] = 0;                     /* none */
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
    m.b[5 + HS_CS_LEN] = 0x10;                      /* past the hello */
    expect_bad(m.b, 5 + HS_CS_LEN + 2, BIG, LB_SNI_MALFORMED);

    hello_named(&m, "a.example", 9);
    m.b[5 + HS_COMP_LEN] = 0;                       /* no compression method */
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);

    /* The extensions block: longer than the hello, or shorter. */
    hello_named(&m, "a.example", 9);
    m.b[5 + HS_EXT_LEN + 1]++;
    expect_bad(m.b, 5 + HS_EXT_LEN + 2, BIG, LB_SNI_MALFORMED);
    m.b[5 + HS_EXT_LEN + 1] -= 2;
    expect_bad(m.b, 5 + HS_EXT_LEN + 2, BIG, LB_SNI_MALFORMED);
    /* A hello a byte longer than its fields: the extensions block must
     * end it, and ends a byte before. */
    hello_named(&m, "a.example", 9);
    m.b[5 + 3]++;
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
    /* A hello too short for its fixed fields. */
    expect_bad((const uint8_t *)"\x16\x03\x01\x00\x30\x01\x00\x00\x10\x03\x03", 11, BIG,
               LB_SNI_MALFORMED);
}

static void
test_malformed_names(void)
{
    struct msg ext, hs, m;

    /* server_name lengths that do not hold together: the list past its
     * extension or short of it, the entry past the list, an empty list,
     * an extension too short for a list's length. */
    hello_named(&m, "a.example", 9);
    m.b[5 + HS_EXTS + 5]++;                         /* list length */
    expect_bad(m.b, 5 + HS_EXTS + 6, BIG, LB_SNI_MALFORMED);
    hello_named(&m, "a.example", 9);
    m.b[5 + HS_EXTS + 5]--;                         /* the list short of it */
    expect_bad(m.b, 5 + HS_EXTS + 6, BIG, LB_SNI_MALFORMED);
    hello_named(&m, "a.example", 9);
    m.b[5 + HS_EXTS + 8]++;                         /* host_name length */
    expect_bad(m.b, 5 + HS_EXTS + 9, BIG, LB_SNI_MALFORMED);
    ext.n = 0;
    put16(&ext, 0), put16(&ext, 2), put16(&ext, 0);
    hello_hs(&hs, ext.b, ext.n);
    frame(&m, hs.b, hs.n, hs.n);
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
    ext.n = 0;
    put16(&ext, 0), put16(&ext, 1), put8(&ext, 0);
    hello_hs(&hs, ext.b, ext.n);
    frame(&m, hs.b, hs.n, hs.n);
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
    /* An extension whose length runs past the block. */
    ext.n = 0;
    put16(&ext, 0x0017), put16(&ext, 9);
    hello_hs(&hs, ext.b, ext.n);
    frame(&m, hs.b, hs.n, hs.n);
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);

    /* host_names that are not host names. */
    static const char *const bad[] = {
        "", "a b", "a/b", "a:443", "a\xc3\xa9", "a\0b", ".", ".a", "a..b", "a.b..", "..", "*.a",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t n = i == 5 ? 3 : strlen(bad[i]);

        hello_named(&m, bad[i], n);
        expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
    }
    /* Refused at the bad byte, before the rest of the name. */
    hello_named(&m, "a b.example.com", 15);
    expect_bad(m.b, 5 + HS_EXTS + 9 + 2, BIG, LB_SNI_MALFORMED);
    /* Two host_names (RFC 6066: at most one of a type). */
    ext.n = 0;
    put16(&ext, 0), put16(&ext, 2 + 2 * 4), put16(&ext, 2 * 4);
    put8(&ext, 0), put16(&ext, 1), put8(&ext, 'a');
    put8(&ext, 0), put16(&ext, 1), put8(&ext, 'b');
    hello_hs(&hs, ext.b, ext.n);
    frame(&m, hs.b, hs.n, hs.n);
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
}

/* Labels up to 63 bytes, names up to 253 without one trailing dot. */
static void
test_name_limits(void)
{
    char name[300], want[300];
    struct msg m;

    /* Case is folded, one trailing dot is dropped; '_' and '-' pass. */
    hello_named(&m, "WwW.Ex-Ample_1.ORG.", 19);
    expect_name(m.b, m.n, BIG, "www.ex-ample_1.org");
    hello_named(&m, "A", 1);
    expect_name(m.b, m.n, BIG, "a");
    hello_named(&m, "A.", 2);
    expect_name(m.b, m.n, BIG, "a");
    hello_named(&m, "192.0.2.1", 9);                /* RFC 6066 forbids it; harmless */
    expect_name(m.b, m.n, BIG, "192.0.2.1");

    memset(name, 'a', 64);
    hello_named(&m, name, 63);
    name[63] = '\0';
    expect_name(m.b, m.n, BIG, name);
    name[63] = 'a';
    hello_named(&m, name, 64);
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);

    /* 253 bytes: four labels of 63 and a dot between, then "a" . */
    for (size_t i = 0; i < 300; i++)
        name[i] = i % 64 == 63 ? '.' : (char)('a' + i % 26);
    name[252] = 'Z';
    memcpy(want, name, 253);
    want[252] = 'z';
    want[253] = '\0';
    hello_named(&m, name, 253);
    expect_name(m.b, m.n, BIG, want);
    name[253] = '.';
    hello_named(&m, name, 254);                     /* and its trailing dot */
    expect_name(m.b, m.n, BIG, want);
    name[253] = 'b';
    hello_named(&m, name, 254);
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
    name[254] = '.';
    hello_named(&m, name, 255);                     /* 254 even without the dot */
    expect_bad(m.b, m.n, BIG, LB_SNI_MALFORMED);
    expect_bad(m.b, 5 + HS_EXTS + 9, BIG, LB_SNI_MALFORMED);
}

/* What the hello holds besides one server_name. */
static void
test_extensions(void)
{
    struct msg ext, hs, m;

    /* No extensions block at all (TLS 1.2 allows it): no name. */
    hello_hs(&hs, NULL, 0);
    frame(&m, hs.b, hs.n, hs.n);
    expect_name(m.b, m.n, BIG, "");
    /* An empty block, and one without server_name. */
    hello_hs(&hs, (const uint8_t *)"", 0);
    frame(&m, hs.b, hs.n, hs.n);
    expect_name(m.b, m.n, BIG, "");
    ext.n = 0;
    put16(&ext, 0x002b), put16(&ext, 3), put8(&ext, 2), put16(&ext, 0x0304);
    put16(&ext, 0x0017), put16(&ext, 0);
    hello_hs(&hs, ext.b, ext.n);
    frame(&m, hs.b, hs.n, hs.n);
    expect_name(m.b, m.n, BIG, "");
    /* server_name after others. */
    put_sni(&ext, 0, "Late.Example", 12);
    hello_hs(&hs, ext.b, ext.n);
    frame(&m, hs.b, hs.n, hs.n);
    expect_name(m.b, m.n, BIG, "late.example");
    /* After server_name, garbage that is not read: an extension whose
     * length runs past everything. */
    ext.n = 0;
    put_sni(&ext, 0, "first.example", 13);
    put16(&ext, 0xffff), put16(&ext, 0xffff), put(&ext, "\xff\xff\xff", 3);
    hello_hs(&hs, ext.b, ext.n);
    frame(&m, hs.b, hs.n, hs.n);
    expect_name(m.b, m.n, BIG, "first.example");
    /* An entry of another name_type is skipped, whatever it holds. */
    ext.n = 0;
    put16(&ext, 0), put16(&ext, 2 + 6 + 6), put16(&ext, 6 + 6);
    put8(&ext, 7), put16(&ext, 3), put(&ext, "\0 .", 3);
    put8(&ext, 0), put16(&ext, 3), put(&ext, "B.c", 3);
    hello_hs(&hs, ext.b, ext.n);
    frame(&m, hs.b, hs.n, hs.n);
    expect_name(m.b, m.n, BIG, "b.c");
    ext.n = 0;
    put_sni(&ext, 9, "xyz", 3);
    hello_hs(&hs, ext.b, ext.n);
    frame(&m, hs.b, hs.n, hs.n);
    expect_name(m.b, m.n, BIG, "");
}

/* The cap bounds the whole hello, known from its length fields at once. */
static void
test_too_long(void)
{
    struct msg hs, m;

    /* A record announcing 500 bytes, cap 100: refused at its header. */
    expect_bad((const uint8_t *)"\x16\x03\x01\x01\xf4", 5, 100, LB_SNI_TOO_LONG);
    /* A record that fits, holding a hello whose length does not: refused
     * at the length. */
    expect_bad((const uint8_t *)"\x16\x03\x01\x00\x50\x01\x00\x01\xf0", 9, 100,
               LB_SNI_TOO_LONG);
    /* The captured hello with a cap a byte short of it: at its header. */
    expect_bad(hello_tls13, sizeof(hello_tls13), sizeof(hello_tls13) - 1, LB_SNI_TOO_LONG);
    expect_bad(hello_tls13, 5, sizeof(hello_tls13) - 1, LB_SNI_TOO_LONG);
    /* In two records cut before the name it takes 5 bytes more: that cap
     * refuses it at the second header, where the 5 bytes are known... */
    unframe(&hs, hello_tls13, sizeof(hello_tls13));
    frame2(&m, hs.b, hs.n, 50);
    expect_bad(m.b, m.n, sizeof(hello_tls13), LB_SNI_TOO_LONG);
    expect_bad(m.b, 5 + 50 + 5, sizeof(hello_tls13), LB_SNI_TOO_LONG);
    expect_name(m.b, m.n, sizeof(hello_tls13) + 5, "api.example.com");
    /* ... cut after the name, the name was read before that header. */
    frame2(&m, hs.b, hs.n, TLS13_SNI_END);
    expect_name(m.b, m.n, sizeof(hello_tls13), "api.example.com");
    /* A cap too small for any header. */
    expect_bad((const uint8_t *)"\x16", 1, 4, LB_SNI_TOO_LONG);
}

static void
test_names(void)
{
    CHECK_EQ_STR(lb_sni_bad_name(LB_SNI_NOT_TLS), "not_tls");
    CHECK_EQ_STR(lb_sni_bad_name(LB_SNI_MALFORMED), "malformed");
    CHECK_EQ_STR(lb_sni_bad_name(LB_SNI_TOO_LONG), "too_long");
    CHECK_EQ_STR(lb_sni_bad_name(LB_SNI_TIMEOUT), "timeout");
    CHECK_EQ_STR(lb_sni_bad_name(LB_SNI_TRUNCATED), "truncated");
    CHECK_EQ_STR(lb_sni_bad_name(LB_SNI_BADS), "unknown");
    CHECK_EQ_STR(lb_sni_bad_name((enum lb_sni_bad)-1), "unknown");
}

int
main(void)
{
    test_captured();
    test_records();
    test_not_tls();
    test_malformed_fields();
    test_malformed_names();
    test_name_limits();
    test_extensions();
    test_too_long();
    test_names();
    return CHECK_DONE();
}
