/* Tests lb/core/tls_hello.c: the server name of real and built
 * ClientHellos, in one record and split across records, each answer on
 * every prefix (0 with a need past it, or the whole's answer), how often a
 * hello sent a byte at a time is read again, and each way of not being a
 * routable hello with the reason it gives. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core.h"

/* openssl s_client -servername Api.Example.COM. -tls1_3: its first flight. */
static const uint8_t real13[] = {
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
  0x33, 0xda, 0x6b, 0x2d, 0x3c, 0xd0, 0xe9, 0x4e, 0x09, 0x7d
};

#define MAX 16384

/* A ClientHello handshake message (type, length, body) with name as its
 * server_name (NULL: none), an extension before it of pad bytes, and with
 * or without an extensions block at all. */
static size_t
build_hello(uint8_t *out, const char *name, size_t pad, bool has_exts)
{
    size_t n = 4, ext_start;

    out[n++] = 3, out[n++] = 3;                     /* legacy_version */
    memset(out + n, 0xab, 32), n += 32;             /* random */
    out[n++] = 0;                                   /* session_id */
    out[n++] = 0, out[n++] = 2, out[n++] = 0x13, out[n++] = 0x01;  /* one suite */
    out[n++] = 1, out[n++] = 0;                     /* compression: null */
    if (has_exts) {
        ext_start = n;
        n += 2;
        if (pad > 0) {
            out[n++] = 0, out[n++] = 21;            /* padding */
            out[n++] = (uint8_t)(pad >> 8), out[n++] = (uint8_t)pad;
            memset(out + n, 0, pad), n += pad;
        }
        if (name != NULL) {
            size_t l = strlen(name);

            out[n++] = 0, out[n++] = 0;             /* server_name */
            out[n++] = (uint8_t)((l + 5) >> 8), out[n++] = (uint8_t)(l + 5);
            out[n++] = (uint8_t)((l + 3) >> 8), out[n++] = (uint8_t)(l + 3);
            out[n++] = 0;                           /* host_name */
            out[n++] = (uint8_t)(l >> 8), out[n++] = (uint8_t)l;
            memcpy(out + n, name, l), n += l;
        }
        out[ext_start] = (uint8_t)((n - ext_start - 2) >> 8);
        out[ext_start + 1] = (uint8_t)(n - ext_start - 2);
    }
    out[0] = 1;
    out[1] = (uint8_t)((n - 4) >> 16), out[2] = (uint8_t)((n - 4) >> 8), out[3] = (uint8_t)(n - 4);
    return n;
}

/* The handshake bytes hs in records of at most per bytes of fragment. */
static size_t
frame(uint8_t *out, const uint8_t *hs, size_t len, size_t per)
{
    size_t n = 0;

    for (size_t off = 0; off < len; off += per) {
        size_t k = len - off < per ? len - off : per;

        out[n++] = 22, out[n++] = 3, out[n++] = 1;
        out[n++] = (uint8_t)(k >> 8), out[n++] = (uint8_t)k;
        memcpy(out + n, hs + off, k), n += k;
    }
    return n;
}

/* The whole's answer, checked against every prefix; the number of
 * distinct needs a client sending a byte at a time goes through. */
static int
read_all(const uint8_t *buf, size_t len, size_t max, char *name, enum lb_sni_bad *bad,
         size_t *rereads)
{
    char pname[LB_SNI_NAME_MAX + 1];
    size_t need = 0, pneed, waits = 0;
    enum lb_sni_bad pbad;
    int w = lb_hello_sni(buf, len, max, name, &need, bad), r;

    for (size_t k = 1; k < len; k++) {
        r = lb_hello_sni(buf, k, max, pname, &pneed, &pbad);
        if (r == 0) {
            CHECK(pneed > k && pneed <= max);
            continue;
        }
        CHECK_EQ_INT(r, w);
        if (r == 1 && w == 1)
            CHECK_EQ_STR(pname, name);
        if (r == -1 && w == -1)
            CHECK_EQ_INT(pbad, *bad);
        break;
    }
    /* A byte at a time, read again only once need bytes are there. */
    for (size_t k = 1; k <= len; k++) {
        r = lb_hello_sni(buf, k, max, pname, &pneed, &pbad);
        waits++;
        if (r != 0)
            break;
        k = pneed - 1;
    }
    if (rereads != NULL)
        *rereads = waits;
    return w;
}

static void
test_real_hello(void)
{
    char name[LB_SNI_NAME_MAX + 1];
    enum lb_sni_bad bad;
    size_t rereads;

    CHECK_EQ_INT(read_all(real13, sizeof(real13), MAX, name, &bad, &rereads), 1);
    CHECK_EQ_STR(name, "api.example.com");      /* case folded, dot gone */
    CHECK(rereads <= 24);
    fprintf(stderr, "real TLS 1.3 hello, %zu bytes: read %zu times a byte at a time\n",
            sizeof(real13), rereads);
}

static void
test_built_hellos(void)
{
    uint8_t hs[4096], rec[8192];
    char name[LB_SNI_NAME_MAX + 1], longname[300];
    enum lb_sni_bad bad;
    size_t n, r;

    /* one record, two records, a record of one byte each */
    n = build_hello(hs, "a.Shop.example.com", 100, true);
    for (size_t per = 1; per <= n; per = per < 8 ? per + 1 : per * 3) {
        r = frame(rec, hs, n, per);
        CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), 1);
        CHECK_EQ_STR(name, "a.shop.example.com");
    }
    /* no server_name; no extensions at all (TLS 1.2 allows it) */
    n = build_hello(hs, NULL, 10, true);
    r = frame(rec, hs, n, n);
    CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), 1);
    CHECK_EQ_STR(name, "");
    n = build_hello(hs, NULL, 0, false);
    r = frame(rec, hs, n, n);
    CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), 1);
    CHECK_EQ_STR(name, "");
    /* garbage after the server_name is not read */
    n = build_hello(hs, "x.example", 0, true);
    r = frame(rec, hs, n, n);
    memset(rec + r, 0xff, 40);
    CHECK_EQ_INT(read_all(rec, r + 40, MAX, name, &bad, NULL), 1);
    /* bad names */
    static const char *const bad_names[] = { "a..b", ".a", "a b", "caf\xc3\xa9", "a/b", "" };
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        n = build_hello(hs, bad_names[i], 0, true);
        r = frame(rec, hs, n, n);
        CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), -1);
        CHECK_EQ_INT(bad, LB_SNI_MALFORMED);
    }
    memset(longname, 'a', 64);
    strcpy(longname + 64, ".com");              /* a label of 64 */
    n = build_hello(hs, longname, 0, true);
    r = frame(rec, hs, n, n);
    CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), -1);
    for (size_t i = 0; i < 254; i++)
        longname[i] = i % 2 ? '.' : 'a';        /* 254 bytes, no trailing dot */
    longname[254] = '\0';
    longname[253] = 'a';
    n = build_hello(hs, longname, 0, true);
    r = frame(rec, hs, n, n);
    CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), -1);
    longname[253] = '.';                        /* 253 and a trailing dot */
    n = build_hello(hs, longname, 0, true);
    r = frame(rec, hs, n, n);
    CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), 1);
    CHECK_EQ_INT(strlen(name), 253);
    /* over the cap: told by the record's length, at once */
    n = build_hello(hs, "a.example", 600, true);
    r = frame(rec, hs, n, n);
    CHECK_EQ_INT(lb_hello_sni(rec, 5, 300, name, &r, &bad), -1);
    CHECK_EQ_INT(bad, LB_SNI_TOO_LONG);
    CHECK_EQ_INT(read_all(rec, frame(rec, hs, n, n), 300, name, &bad, NULL), -1);
    CHECK_EQ_INT(bad, LB_SNI_TOO_LONG);
}

static void
test_not_hellos(void)
{
    static const struct {
        const char *what;
        const uint8_t *bytes;
        size_t len;
        enum lb_sni_bad bad;
    } cases[] = {
#define B(s) (const uint8_t *)(s), sizeof(s) - 1
        { "plain HTTP", B("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), LB_SNI_NOT_TLS },
        { "SSLv2 hello", B("\x80\x2e\x01\x03\x01"), LB_SNI_NOT_TLS },
        { "SSH", B("SSH-2.0-OpenSSH_9.2\r\n"), LB_SNI_NOT_TLS },
        { "record version 2", B("\x16\x02\x00\x00\x10"), LB_SNI_NOT_TLS },
        { "a ServerHello first", B("\x16\x03\x01\x00\x04\x02\x00\x00\x00"), LB_SNI_NOT_TLS },
        { "an empty record", B("\x16\x03\x01\x00\x00"), LB_SNI_MALFORMED },
        { "a record over 2^14", B("\x16\x03\x01\x40\x01"), LB_SNI_MALFORMED },
#undef B
    };
    char name[LB_SNI_NAME_MAX + 1];
    enum lb_sni_bad bad;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bad = LB_SNI_BADS;
        if (read_all(cases[i].bytes, cases[i].len, MAX, name, &bad, NULL) != -1 ||
            bad != cases[i].bad) {
            fprintf(stderr, "case %s: bad %d\n", cases[i].what, (int)bad);
            check_failures++;
        }
    }

    uint8_t hs[512], rec[1024];
    size_t n = build_hello(hs, "a.example", 0, true), r;

    /* an alert record between the hello's two records */
    r = frame(rec, hs, 20, 20);
    memcpy(rec + r, "\x15\x03\x03\x00\x02\x02\x28", 7);
    CHECK_EQ_INT(read_all(rec, r + 7, MAX, name, &bad, NULL), -1);
    CHECK_EQ_INT(bad, LB_SNI_MALFORMED);
    /* a session id of 33 */
    hs[4 + 34] = 33;
    r = frame(rec, hs, n, n);
    CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), -1);
    CHECK_EQ_INT(bad, LB_SNI_MALFORMED);
    /* odd cipher_suites */
    n = build_hello(hs, "a.example", 0, true);
    hs[4 + 36] = 3;
    r = frame(rec, hs, n, n);
    CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), -1);
    CHECK_EQ_INT(bad, LB_SNI_MALFORMED);
    /* extensions longer than the hello */
    n = build_hello(hs, "a.example", 0, true);
    hs[4 + 42] = 0x7f;
    r = frame(rec, hs, n, n);
    CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), -1);
    CHECK_EQ_INT(bad, LB_SNI_MALFORMED);
    /* a server_name list that overruns its extension */
    n = build_hello(hs, "a.example", 0, true);
    hs[4 + 48] += 1;
    r = frame(rec, hs, n, n);
    CHECK_EQ_INT(read_all(rec, r, MAX, name, &bad, NULL), -1);
    CHECK_EQ_INT(bad, LB_SNI_MALFORMED);
    CHECK_EQ_STR(lb_sni_bad_name(LB_SNI_TRUNCATED), "truncated");
    CHECK_EQ_STR(lb_sni_bad_name(LB_SNI_BADS), "unknown");
}

int
main(void)
{
    test_real_hello();
    test_built_hellos();
    test_not_hellos();
    return CHECK_DONE();
}
