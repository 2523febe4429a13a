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
#include "lb_enum.h"

#define DSC_HEADER_LEN 12
#define DSC_CLASS_IN 1
#define DSC_TYPE_OPT 41
#define DSC_FLAG_QR 0x8000u
#define DSC_FLAG_TC 0x0200u
#define DSC_FLAG_RD 0x0100u
#define DSC_LABEL_MAX 63
#define DSC_WIRE_NAME_MAX 255

/* RFC 1035's RCODEs 0..5, as the errors of a round name them. */
static const char *const dsc_rcode_names[] = {
    "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED",
};

static uint16_t
dsc_get16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static void
dsc_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

int
dsc_msg_query(uint8_t *buf, size_t cap, uint16_t id, const char *name, uint16_t type)
{
    size_t n = strlen(name), pos = DSC_HEADER_LEN;
    const char *label = name;

    if (n > 0 && name[n - 1] == '.')
        n--;                            /* the root's dot is the final 0 */
    if (n == 0 || n > DSC_NAME_MAX - 1 || cap < DSC_HEADER_LEN + n + 2 + 4 + 11)
        return -1;
    memset(buf, 0, DSC_HEADER_LEN);
    dsc_put16(buf, id);
    dsc_put16(buf + 2, DSC_FLAG_RD);    /* a registry's DNS is often a recursor */
    dsc_put16(buf + 4, 1);              /* one question */
    dsc_put16(buf + 10, 1);             /* one additional: the OPT record */
    while (label < name + n) {
        const char *dot = memchr(label, '.', (size_t)(name + n - label));
        size_t len = (size_t)((dot != NULL ? dot : name + n) - label);

        if (len == 0 || len > DSC_LABEL_MAX)
            return -1;
        buf[pos++] = (uint8_t)len;
        memcpy(buf + pos, label, len);
        pos += len;
        label += len + 1;
    }
    buf[pos++] = 0;
    dsc_put16(buf + pos, type);
    dsc_put16(buf + pos + 2, DSC_CLASS_IN);
    pos += 4;
    /* EDNS0: answers up to DSC_UDP_MAX bytes come over UDP; larger ones
     * are truncated and asked again over TCP. */
    buf[pos++] = 0;                     /* root owner */
    dsc_put16(buf + pos, DSC_TYPE_OPT);
    dsc_put16(buf + pos + 2, DSC_UDP_MAX);
    memset(buf + pos + 4, 0, 6);        /* extended rcode, version, flags, rdlen */
    pos += 10;
    return (int)pos;
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
        if (wire > DSC_WIRE_NAME_MAX)
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
    rr.type = dsc_get16(msg + *pos);
    rclass = dsc_get16(msg + *pos + 2);
    rdlen = dsc_get16(msg + *pos + 8);
    rdata = *pos + 10;
    if (rdata + rdlen > len) {
        snprintf(err, errlen, "record longer than the message");
        return -1;
    }
    *pos = rdata + rdlen;
    if (rclass != DSC_CLASS_IN || rr.owner[0] == '\0')
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
        rr.priority = dsc_get16(msg + rdata);
        rr.weight = dsc_get16(msg + rdata + 2);
        rr.port = dsc_get16(msg + rdata + 4);
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
    size_t pos = DSC_HEADER_LEN;

    memset(out, 0, sizeof(*out));
    if (len < DSC_HEADER_LEN) {
        snprintf(err, errlen, "answer of %zu bytes, shorter than a header", len);
        return -1;
    }
    flags = dsc_get16(msg + 2);
    for (int i = 0; i < 4; i++)
        counts[i] = dsc_get16(msg + 4 + 2 * i);
    if (dsc_get16(msg) != id || !(flags & DSC_FLAG_QR) || counts[0] != 1 ||
        dsc_name_read(msg, len, &pos, qname) != 0 || pos + 4 > len ||
        !dsc_name_equal(qname, name) || dsc_get16(msg + pos) != type ||
        dsc_get16(msg + pos + 2) != DSC_CLASS_IN) {
        snprintf(err, errlen, "not an answer to the query");
        return 1;
    }
    pos += 4;
    out->rcode = flags & 0xF;
    out->is_truncated = (flags & DSC_FLAG_TC) != 0;
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

LB_ENUM_NAME(dsc_rcode_name, int, dsc_rcode_names, "error")
