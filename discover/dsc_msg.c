/*
 * dsc_msg.c - DNS messages (RFC 1035, SRV from RFC 2782, EDNS0 from RFC
 * 6891): the query discovery sends and the parse of its answer. Pure: no
 * I/O, no clock, any thread; unit-tested and fuzzed on its own.
 *
 * The parse trusts nothing: every length is checked against the message,
 * a compression pointer must point before the name that uses it (so no
 * loop), a name is at most 255 bytes on the wire, and a record whose name
 * is not a host name (a byte outside [A-Za-z0-9_-] in a label) is skipped
 * rather than shown.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsc_dns.h"
#include "lb_dns.h"

/* RD: a registry's DNS is often a recursor. EDNS0: answers up to
 * DSC_UDP_MAX bytes come over UDP; larger ones are truncated and asked
 * again over TCP. The root is no name to discover. */
int
dsc_msg_query(uint8_t *buf, size_t cap, uint16_t id, const char *name, uint16_t type)
{
    if (name[0] == '\0' || strcmp(name, ".") == 0)
        return -1;
    return lb_dns_query(buf, cap, id, name, type, true, DSC_UDP_MAX);
}

/* Reads the name at *pos into out (lower case, no final dot) and moves
 * *pos past it. -1 on a malformed name; 0 with out = "" when it is not a
 * host name (the record is skipped). */
static int
dsc_name_read(const uint8_t *msg, size_t len, size_t *pos, char *out)
{
    size_t p = *pos, end = 0, wire = 0, olen = 0, floor = *pos;
    bool is_jumped = false, is_host = true;

    for (;;) {
        uint8_t c;

        if (p >= len)
            return -1;
        c = msg[p];
        if ((c & 0xC0) == 0xC0) {
            size_t to;

            if (p + 1 >= len)
                return -1;
            to = (size_t)(((c & 0x3F) << 8) | msg[p + 1]);
            if (to >= floor)            /* only backwards: no loop */
                return -1;
            if (!is_jumped)
                end = p + 2;
            is_jumped = true;
            floor = to;
            p = to;
            continue;
        }
        if ((c & 0xC0) != 0)
            return -1;                  /* the 0x40 and 0x80 label types */
        wire += (size_t)c + 1;
        if (wire > LB_DNS_WIRE_NAME_MAX)
            return -1;
        if (c == 0) {
            if (!is_jumped)
                end = p + 1;
            break;
        }
        if (p + 1 + c > len)
            return -1;
        if (olen > 0)
            out[olen++] = '.';
        for (size_t i = 0; i < c; i++) {
            unsigned char ch = msg[p + 1 + i];

            if (!isalnum(ch) && ch != '-' && ch != '_')
                is_host = false;
            out[olen++] = (char)tolower(ch);
        }
        p += 1 + (size_t)c;
    }
    out[is_host ? olen : 0] = '\0';
    *pos = end;
    return 0;
}

/* Compares a wire name with a text one, ignoring case and a final dot. */
static bool
dsc_name_equal(const char *wire_text, const char *name)
{
    size_t n = strlen(name);

    if (n > 0 && name[n - 1] == '.')
        n--;
    return strlen(wire_text) == n && strncasecmp(wire_text, name, n) == 0;
}

static int
dsc_msg_add(struct dsc_msg *m, const struct dsc_rr *rr)
{
    if (m->nrrs == m->cap) {
        size_t cap = m->cap != 0 ? 2 * m->cap : 16;
        struct dsc_rr *r = realloc(m->rrs, cap * sizeof(*r));

        if (r == NULL)
            return -1;
        m->rrs = r;
        m->cap = cap;
    }
    m->rrs[m->nrrs++] = *rr;
    return 0;
}

/* One resource record at *pos: kept in m when it is an A, AAAA or SRV of
 * class IN with a host name, skipped otherwise. */
static int
dsc_rr_read(const uint8_t *msg, size_t len, size_t *pos, int section, struct dsc_msg *m,
            char *err, size_t errlen)
{
    struct dsc_rr rr = { .section = (uint8_t)section };
    uint16_t rclass, rdlen;
    size_t rdata;

    if (dsc_name_read(msg, len, pos, rr.owner) != 0 || *pos + 10 > len) {
        snprintf(err, errlen, "malformed record");
        return -1;
    }
    rr.type = lb_dns_get16(msg + *pos);
    rclass = lb_dns_get16(msg + *pos + 2);
    rdlen = lb_dns_get16(msg + *pos + 8);
    rdata = *pos + 10;
    if (rdata + rdlen > len) {
        snprintf(err, errlen, "record longer than the message");
        return -1;
    }
    *pos = rdata + rdlen;
    if (rclass != LB_DNS_CLASS_IN || rr.owner[0] == '\0')
        return 0;
    switch (rr.type) {
    case DSC_TYPE_A:
    case DSC_TYPE_AAAA: {
        size_t alen = rr.type == DSC_TYPE_A ? 4 : 16;

        if (rdlen != alen) {
            snprintf(err, errlen, "%s record of %u bytes", rr.type == DSC_TYPE_A ? "A" : "AAAA",
                     rdlen);
            return -1;
        }
        memcpy(rr.addr, msg + rdata, alen);
        break;
    }
    case DSC_TYPE_SRV: {
        size_t tpos = rdata + 6;

        /* the target is read within the message: a compressed one may
         * point anywhere before it */
        if (rdlen < 7 || dsc_name_read(msg, rdata + rdlen, &tpos, rr.target) != 0 ||
            tpos != rdata + rdlen) {
            snprintf(err, errlen, "malformed SRV record");
            return -1;
        }
        rr.priority = lb_dns_get16(msg + rdata);
        rr.weight = lb_dns_get16(msg + rdata + 2);
        rr.port = lb_dns_get16(msg + rdata + 4);
        if (rr.target[0] == '\0')
            return 0;                   /* "." (no service) or not a host */
        break;
    }
    default:
        return 0;                       /* CNAME, OPT, ...: the answer's
                                           A records already follow them */
    }
    if (dsc_msg_add(m, &rr) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int
dsc_msg_parse(const uint8_t *msg, size_t len, uint16_t id, const char *name, uint16_t type,
              struct dsc_msg *out, char *err, size_t errlen)
{
    char qname[DSC_NAME_MAX + 1];
    uint16_t flags, counts[4];
    size_t pos = LB_DNS_HEADER_LEN;

    memset(out, 0, sizeof(*out));
    if (len < LB_DNS_HEADER_LEN) {
        snprintf(err, errlen, "answer of %zu bytes, shorter than a header", len);
        return -1;
    }
    flags = lb_dns_get16(msg + 2);
    for (int i = 0; i < 4; i++)
        counts[i] = lb_dns_get16(msg + 4 + 2 * i);
    if (lb_dns_get16(msg) != id || !(flags & LB_DNS_FLAG_QR) || counts[0] != 1 ||
        dsc_name_read(msg, len, &pos, qname) != 0 || pos + 4 > len ||
        !dsc_name_equal(qname, name) || lb_dns_get16(msg + pos) != type ||
        lb_dns_get16(msg + pos + 2) != LB_DNS_CLASS_IN) {
        snprintf(err, errlen, "not an answer to the query");
        return 1;
    }
    pos += 4;
    out->rcode = flags & 0xF;
    out->is_truncated = (flags & LB_DNS_FLAG_TC) != 0;
    if (out->is_truncated)
        return 0;                       /* the records may be cut: ask over TCP */
    for (int section = 1; section <= 3; section++) {
        for (uint16_t i = 0; i < counts[section]; i++) {
            if (dsc_rr_read(msg, len, &pos, section, out, err, errlen) != 0) {
                dsc_msg_fini(out);
                return -1;
            }
        }
    }
    return 0;
}

void
dsc_msg_fini(struct dsc_msg *m)
{
    free(m->rrs);
    memset(m, 0, sizeof(*m));
}
