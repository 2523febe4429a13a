/*
 * conf_dgram.c - the keys of the datagram checks: check = dns
 * (check_dns_name, check_dns_type, check_dns_rcode) and check = udp
 * (check_send, check_expect_bytes): their values, and their relation to
 * the pool's check.
 *
 * Bytes are written in one of two ways: "0x" and pairs of hex digits for
 * a binary protocol, or text in which \\, \r, \n, \t, \0 and \xHH are
 * escapes (the C escapes a line-based protocol needs). There are no
 * quotes: inih keeps them as bytes of the value. What inih takes away is
 * written with an escape: blanks at either end (\x20) and a ';' after a
 * blank, which starts a comment (\x3b).
 *
 * Each key is refused with a check that would ignore it, so that a typo of
 * the check's kind shows (as conf_check_protocol does). A tcp check does
 * not take check_send: its verdict is the connect, and a stream has no
 * datagram's end to know when the reply is whole; the redis, mysql and
 * pgsql checks are the tcp conversations lb speaks.
 */
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "conf_keys.h"
#include "conf_parse.h"
#include "conf_value.h"
#include "lb_dns.h"

static int
conf_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int
conf_parse_dns_type(const char *s, uint16_t *out, char *err, size_t errlen)
{
    if (lb_dns_type_parse(s, strlen(s), out))
        return 0;
    snprintf(err, errlen, "\"%s\" is not a DNS type (use A, AAAA, NS, MX, TXT, CNAME, PTR, "
             "SRV, SOA, ANY or TYPEnnn, nnn 1..65535)", s);
    return -1;
}

int
conf_parse_dns_rcodes(const char *s, uint16_t *out, char *err, size_t errlen)
{
    const char *p = s, *item;
    uint16_t mask = 0;
    bool more = true;

    while (more) {
        size_t n = conf_list_next(&p, &item, &more);
        int rcode = n > 0 ? lb_dns_rcode_parse(item, n) : -1;

        if (n == 0) {
            snprintf(err, errlen, *s == '\0' ? "empty value (expected rcode names, e.g. "
                                               "NOERROR, NXDOMAIN)"
                                             : "\"%s\" has an empty item (expected rcode "
                                               "names, e.g. NOERROR, NXDOMAIN)", s);
            return -1;
        }
        if (rcode < 0) {
            snprintf(err, errlen, "\"%.*s\" is not an rcode (use NOERROR, FORMERR, SERVFAIL, "
                     "NXDOMAIN, NOTIMP, REFUSED, YXDOMAIN, YXRRSET, NXRRSET, NOTAUTH or "
                     "NOTZONE)", (int)n, item);
            return -1;
        }
        mask |= (uint16_t)(1u << rcode);
    }
    *out = mask;
    return 0;
}

/* "0x" and hex digits, two a byte. */
static int
conf_parse_hex(const char *s, struct conf_bytes *b, char *err, size_t errlen)
{
    size_t n = strlen(s + 2);

    for (size_t i = 0; i < n; i++) {
        if (conf_hex_digit(s[2 + i]) < 0) {
            snprintf(err, errlen, "\"%s\" is not hex after its 0x (use 0-9 and a-f, two "
                     "digits a byte)", s);
            return -1;
        }
    }
    if (n == 0 || n % 2 != 0) {
        snprintf(err, errlen, n == 0 ? "\"%s\" has no hex digits after 0x"
                                     : "\"%s\" has an odd number of hex digits (two a byte)",
                 s);
        return -1;
    }
    for (size_t i = 0; i < n; i += 2) {
        int hi = conf_hex_digit(s[2 + i]), lo = conf_hex_digit(s[3 + i]);

        b->v[b->len++] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* Text, with escapes. */
static int
conf_parse_escaped(const char *s, struct conf_bytes *b, char *err, size_t errlen)
{
    static const char from[] = "\\rnt0", to[] = "\\\r\n\t";

    for (const char *p = s; *p != '\0'; p++) {
        const char *e;
        int hi, lo;

        if (b->len == CONF_BYTES_MAX)
            break;
        if (*p != '\\') {
            b->v[b->len++] = (uint8_t)*p;
            continue;
        }
        if (p[1] != '\0' && (e = strchr(from, p[1])) != NULL) {
            b->v[b->len++] = (uint8_t)to[e - from];     /* \0: the NUL after "\t" */
            p++;
            continue;
        }
        if (p[1] == 'x' && (hi = conf_hex_digit(p[2])) >= 0 &&
            (lo = conf_hex_digit(p[3])) >= 0) {
            b->v[b->len++] = (uint8_t)(hi << 4 | lo);
            p += 3;
            continue;
        }
        snprintf(err, errlen, "\"%.4s\" in \"%s\" is not an escape (use \\\\, \\r, \\n, "
                 "\\t, \\0 or \\xHH with two hex digits)", p, s);
        return -1;
    }
    return 0;
}

int
conf_parse_bytes(const char *s, struct conf_bytes *out, char *err, size_t errlen)
{
    struct conf_bytes b = { .len = 0 };
    bool is_hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    size_t in = strlen(s);

    /* Each byte takes one character at least: a value longer than the
     * buffer cannot fit (a line of inih's never is). */
    if ((is_hex ? (in - 2) / 2 : in) > CONF_BYTES_MAX) {
        snprintf(err, errlen, "longer than %d bytes", CONF_BYTES_MAX);
        return -1;
    }
    if ((is_hex ? conf_parse_hex(s, &b, err, errlen)
                : conf_parse_escaped(s, &b, err, errlen)) != 0)
        return -1;
    *out = b;
    return 0;
}

/* The escape of b[i] of len into esc (5 bytes); its length. */
static size_t
conf_byte_text(const uint8_t *b, size_t i, size_t len, char *esc)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t c = b[i];

    esc[0] = '\\';
    if (c == '\\' || c == '\r' || c == '\n' || c == '\t' || c == '\0') {
        esc[1] = c == '\\' ? '\\' : c == '\r' ? 'r' : c == '\n' ? 'n' : c == '\t' ? 't' : '0';
        return 2;
    }
    /* what is not printable, and what inih or the hex form would read
     * otherwise */
    if (c < 0x20 || c >= 0x7f || c == ';' || (c == ' ' && (i == 0 || i + 1 == len)) ||
        (i == 0 && c == '0' && len > 1 && (b[1] == 'x' || b[1] == 'X'))) {
        esc[1] = 'x';
        esc[2] = hex[c >> 4];
        esc[3] = hex[c & 0xf];
        return 4;
    }
    esc[0] = (char)c;
    return 1;
}

void
conf_bytes_text(const uint8_t *b, size_t len, char *out, size_t outlen)
{
    size_t o = 0, need = 0;
    char esc[5];

    if (outlen == 0)
        return;
    for (size_t i = 0; i < len; i++)
        need += conf_byte_text(b, i, len, esc);
    /* all of it, or what leaves room for "..." */
    for (size_t i = 0; i < len; i++) {
        size_t n = conf_byte_text(b, i, len, esc);

        if (need < outlen ? o + n >= outlen : o + n + 3 >= outlen) {
            if (o + 3 < outlen) {
                memcpy(out + o, "...", 3);
                o += 3;
            }
            break;
        }
        memcpy(out + o, esc, n);
        o += n;
    }
    out[o] = '\0';
}

/* check_dns_name: a host name (conf_host_normalise's labels) or "." */
static bool
conf_dns_check_name_is_valid(const char *s)
{
    char lower[CONF_HOST_MAX + 1];

    return strcmp(s, ".") == 0 || conf_host_normalise(s, strlen(s), lower);
}

void
conf_check_dgram(struct conf_parse *p, const struct conf_pool *pool,
                 const struct conf_lines *l)
{
    static const char *const dns_keys[] = { "check_dns_name", "check_dns_type",
                                            "check_dns_rcode" };
    static const char *const udp_keys[] = { "check_send", "check_expect_bytes" };
    int kname = conf_key_find(CONF_SECTION_POOL, "check_dns_name");
    int ksend = conf_key_find(CONF_SECTION_POOL, "check_send");
    int kcheck = conf_key_find(CONF_SECTION_POOL, "check");
    int kproxy = conf_key_find(CONF_SECTION_POOL, "check_send_proxy");

    for (size_t i = 0; i < sizeof(dns_keys) / sizeof(dns_keys[0]); i++) {
        int k = conf_key_find(CONF_SECTION_POOL, dns_keys[i]);

        if (l->key[k] != 0 && pool->check != CONF_CHECK_DNS && !l->bad[kcheck])
            conf_error(p, l->key[k], "%s needs check = dns", dns_keys[i]);
    }
    for (size_t i = 0; i < sizeof(udp_keys) / sizeof(udp_keys[0]); i++) {
        int k = conf_key_find(CONF_SECTION_POOL, udp_keys[i]);

        if (l->key[k] != 0 && pool->check != CONF_CHECK_UDP && !l->bad[kcheck])
            conf_error(p, l->key[k], "%s needs check = udp", udp_keys[i]);
    }
    if (pool->check != CONF_CHECK_DNS && pool->check != CONF_CHECK_UDP)
        return;
    if (pool->check == CONF_CHECK_DNS && !l->bad[kname] &&
        !conf_dns_check_name_is_valid(pool->check_dns_name))
        conf_error(p, l->key[kname], "check_dns_name: \"%s\" is not a DNS name (labels of 1 "
                   "to 63 of A-Z a-z 0-9 - _, at most 253 characters; . for the root)",
                   pool->check_dns_name);
    /* An empty datagram is a valid one, but no service we know answers
     * it: most likely the key was forgotten. */
    if (pool->check == CONF_CHECK_UDP && !l->bad[ksend] && pool->check_send.len == 0)
        conf_error(p, l->key[ksend] ? l->key[ksend] : l->key[kcheck] ? l->key[kcheck]
                                                                     : pool->line,
                   "pool %s: check = udp needs check_send (the datagram to send)",
                   pool->name);
    if (pool->check_send_proxy && !l->bad[kproxy])
        conf_error(p, l->key[kproxy], "check_send_proxy = on needs a check over TCP (check "
                   "= %s sends datagrams)", conf_check_name(pool->check));
}
