/*
 * lb_dns.h - the DNS wire basics three modules share (RFC 1035): the names
 * of record types and response codes, and the query.
 *
 * conf/ parses the names (check_dns_type, check_dns_rcode), health/ (the
 * dns check) and discover/ build their queries and name the codes they get
 * back. Header-only and dependent on nothing, as lb_enum.h: conf/ links no
 * other module, and health/ and discover/ must not depend on each other
 * (STYLE.md section 0). Pure: no state, any thread.
 */
#ifndef LB_DNS_H
#define LB_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define LB_DNS_HEADER_LEN 12
#define LB_DNS_CLASS_IN 1
#define LB_DNS_FLAG_QR 0x8000u
#define LB_DNS_FLAG_TC 0x0200u
#define LB_DNS_FLAG_RD 0x0100u
#define LB_DNS_LABEL_MAX 63
#define LB_DNS_WIRE_NAME_MAX 255        /* a name on the wire, its 0 included */
#define LB_DNS_OPT_LEN 11               /* an EDNS0 OPT record without options */
/* The longest query lb_dns_query writes. */
#define LB_DNS_QUERY_MAX (LB_DNS_HEADER_LEN + LB_DNS_WIRE_NAME_MAX + 4 + LB_DNS_OPT_LEN)
/* Room for lb_dns_type_text and lb_dns_rcode_text ("TYPE65535", "RCODE15"). */
#define LB_DNS_TEXT_MAX 12

#define LB_DNS_TYPE_A 1
#define LB_DNS_TYPE_NS 2
#define LB_DNS_TYPE_CNAME 5
#define LB_DNS_TYPE_SOA 6
#define LB_DNS_TYPE_PTR 12
#define LB_DNS_TYPE_MX 15
#define LB_DNS_TYPE_TXT 16
#define LB_DNS_TYPE_AAAA 28
#define LB_DNS_TYPE_SRV 33
#define LB_DNS_TYPE_OPT 41
#define LB_DNS_TYPE_ANY 255

struct lb_dns_word {
    const char *name;
    uint16_t value;
};

/* The types a config may name; any other is written TYPEnnn (RFC 3597). */
static const struct lb_dns_word lb_dns_types[] = {
    { "A", LB_DNS_TYPE_A },         { "NS", LB_DNS_TYPE_NS },
    { "CNAME", LB_DNS_TYPE_CNAME }, { "SOA", LB_DNS_TYPE_SOA },
    { "PTR", LB_DNS_TYPE_PTR },     { "MX", LB_DNS_TYPE_MX },
    { "TXT", LB_DNS_TYPE_TXT },     { "AAAA", LB_DNS_TYPE_AAAA },
    { "SRV", LB_DNS_TYPE_SRV },     { "ANY", LB_DNS_TYPE_ANY },
};

/* The RCODEs of a header's 4 bits that have a name (RFC 1035, 2136),
 * indexed by their value; 11..15 are unassigned. */
static const char *const lb_dns_rcodes[] = {
    "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED",
    "YXDOMAIN", "YXRRSET", "NXRRSET", "NOTAUTH", "NOTZONE",
};
#define LB_DNS_RCODES (sizeof(lb_dns_rcodes) / sizeof(lb_dns_rcodes[0]))

static inline uint16_t
lb_dns_get16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static inline void
lb_dns_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* The type named by the n bytes at s, any case: a name of lb_dns_types or
 * TYPEnnn, nnn 1..65535 in decimal. false for anything else. */
static inline bool
lb_dns_type_parse(const char *s, size_t n, uint16_t *out)
{
    uint32_t v = 0;

    for (size_t i = 0; i < sizeof(lb_dns_types) / sizeof(lb_dns_types[0]); i++) {
        if (strlen(lb_dns_types[i].name) == n && strncasecmp(s, lb_dns_types[i].name, n) == 0) {
            *out = lb_dns_types[i].value;
            return true;
        }
    }
    if (n < 5 || n > 9 || strncasecmp(s, "TYPE", 4) != 0 || s[4] == '0')
        return false;
    for (size_t i = 4; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    if (v == 0 || v > UINT16_MAX)
        return false;
    *out = (uint16_t)v;
    return true;
}

/* type's name, or TYPEnnn, in buf (LB_DNS_TEXT_MAX bytes). */
static inline const char *
lb_dns_type_text(uint16_t type, char *buf, size_t len)
{
    for (size_t i = 0; i < sizeof(lb_dns_types) / sizeof(lb_dns_types[0]); i++) {
        if (lb_dns_types[i].value == type) {
            snprintf(buf, len, "%s", lb_dns_types[i].name);
            return buf;
        }
    }
    snprintf(buf, len, "TYPE%u", type);
    return buf;
}

/* The RCODE named by the n bytes at s, any case, or -1. */
static inline int
lb_dns_rcode_parse(const char *s, size_t n)
{
    for (size_t i = 0; i < LB_DNS_RCODES; i++) {
        if (strlen(lb_dns_rcodes[i]) == n && strncasecmp(s, lb_dns_rcodes[i], n) == 0)
            return (int)i;
    }
    return -1;
}

/* rcode's name, or RCODEn for an unassigned one, in buf (LB_DNS_TEXT_MAX
 * bytes). */
static inline const char *
lb_dns_rcode_text(int rcode, char *buf, size_t len)
{
    if (rcode >= 0 && (size_t)rcode < LB_DNS_RCODES)
        snprintf(buf, len, "%s", lb_dns_rcodes[rcode]);
    else
        snprintf(buf, len, "RCODE%d", rcode);
    return buf;
}

/* A query of name (text: labels of any bytes but '.', a final dot or not;
 * "." or "" is the root) and type, class IN, into buf (cap bytes): id, RD
 * when rd, one question, and an EDNS0 OPT record offering edns_size-byte
 * answers unless edns_size is 0. Its length, or -1 when a label is empty
 * or longer than 63 bytes, the name longer than 255 bytes on the wire, or
 * buf too small. The question is never compressed: it starts at byte 12,
 * with nothing before it to point to. */
static inline int
lb_dns_query(uint8_t *buf, size_t cap, uint16_t id, const char *name, uint16_t type, bool rd,
             uint16_t edns_size)
{
    size_t n = strlen(name), pos = LB_DNS_HEADER_LEN;
    const char *label = name;

    if (n > 0 && name[n - 1] == '.')
        n--;                            /* the root's dot is the final 0 */
    /* n text bytes are n + 2 on the wire: a length for the first label
     * (the dots become the others') and the root's 0 */
    if ((n > 0 ? n + 2 : 1) > LB_DNS_WIRE_NAME_MAX ||
        cap < LB_DNS_HEADER_LEN + (n > 0 ? n + 2 : 1) + 4 + (edns_size ? LB_DNS_OPT_LEN : 0))
        return -1;
    memset(buf, 0, LB_DNS_HEADER_LEN);
    lb_dns_put16(buf, id);
    lb_dns_put16(buf + 2, rd ? LB_DNS_FLAG_RD : 0);
    lb_dns_put16(buf + 4, 1);           /* one question */
    lb_dns_put16(buf + 10, edns_size ? 1 : 0);
    while (label < name + n) {
        const char *dot = memchr(label, '.', (size_t)(name + n - label));
        size_t len = (size_t)((dot != NULL ? dot : name + n) - label);

        if (len == 0 || len > LB_DNS_LABEL_MAX)
            return -1;
        buf[pos++] = (uint8_t)len;
        memcpy(buf + pos, label, len);
        pos += len;
        label += len + 1;
    }
    /* "a." ends in a dot that was the root's: n stopped before it, but a
     * name ending in ".." (an empty last label) did not */
    if (n > 0 && name[n - 1] == '.')
        return -1;
    buf[pos++] = 0;
    lb_dns_put16(buf + pos, type);
    lb_dns_put16(buf + pos + 2, LB_DNS_CLASS_IN);
    pos += 4;
    if (edns_size != 0) {
        buf[pos++] = 0;                 /* root owner */
        lb_dns_put16(buf + pos, LB_DNS_TYPE_OPT);
        lb_dns_put16(buf + pos + 2, edns_size);
        memset(buf + pos + 4, 0, 6);    /* extended rcode, version, flags, rdlen */
        pos += 10;
    }
    return (int)pos;
}

#endif /* LB_DNS_H */
