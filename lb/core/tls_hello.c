/*
 * tls_hello.c - the server name of a TLS ClientHello, read from the raw
 * bytes a client sent first (core.h, "tls_hello.c").
 *
 * The hello is a handshake message carried in one or more TLS records: a
 * cursor walks the records' fragments as one stream (struct lb_hello_cur),
 * so that every field is read the same whether it sits in one record or
 * across two. The reader is run again from the first byte each time more
 * bytes came; when they run out it says where the field it was reading
 * ends (*need), within the current record, so that the caller waits for
 * that many instead of trying after every byte.
 */
#include <string.h>

#include "core.h"
#include "lb_enum.h"

static const char *const lb_sni_bad_names[] = {
    [LB_SNI_NOT_TLS] = "not_tls", [LB_SNI_MALFORMED] = "malformed",
    [LB_SNI_TOO_LONG] = "too_long", [LB_SNI_TIMEOUT] = "timeout",
    [LB_SNI_TRUNCATED] = "truncated",
};
LB_ENUM_NAME(lb_sni_bad_name, enum lb_sni_bad, lb_sni_bad_names, "unknown")

#define LB_TLS_RECORD_HEADER 5
#define LB_TLS_HANDSHAKE 22
#define LB_TLS_CLIENT_HELLO 1
/* TLSPlaintext.length is at most 2^14 (RFC 8446 section 5.1); a longer
 * record is no client's. */
#define LB_TLS_RECORD_MAX 16384
#define LB_TLS_EXT_SERVER_NAME 0
#define LB_TLS_NAME_HOST 0

/* Where the walk is: the stream is buf[0..len), pos the next byte to read,
 * rec_end the end of the record pos is in (pos == rec_end: at the next
 * record's header). */
struct lb_hello_cur {
    const uint8_t *buf;
    size_t len, max;
    size_t pos, rec_end;
    size_t need;                    /* set when the bytes ran out */
    enum lb_sni_bad bad;            /* set when they cannot be a hello */
};

enum { LB_CUR_OK = 1, LB_CUR_MORE = 0, LB_CUR_BAD = -1 };

static int
lb_hello_want(struct lb_hello_cur *c, size_t end)
{
    if (end > c->max) {
        c->bad = LB_SNI_TOO_LONG;
        return LB_CUR_BAD;
    }
    c->need = end;
    return LB_CUR_MORE;
}

/* At a record boundary: the next record's header, which must continue the
 * handshake (a record of another type in the middle of a hello is no
 * client's). */
static int
lb_hello_next_record(struct lb_hello_cur *c, bool is_first)
{
    const uint8_t *h = c->buf + c->pos;
    size_t avail = c->len - c->pos, rlen;

    if (avail >= 1 && h[0] != LB_TLS_HANDSHAKE) {
        c->bad = is_first ? LB_SNI_NOT_TLS : LB_SNI_MALFORMED;
        return LB_CUR_BAD;
    }
    if (avail >= 2 && h[1] != 3) {
        c->bad = is_first ? LB_SNI_NOT_TLS : LB_SNI_MALFORMED;
        return LB_CUR_BAD;
    }
    if (avail < LB_TLS_RECORD_HEADER)
        return lb_hello_want(c, c->pos + LB_TLS_RECORD_HEADER);
    rlen = (size_t)h[3] << 8 | h[4];
    if (rlen == 0 || rlen > LB_TLS_RECORD_MAX) {
        c->bad = LB_SNI_MALFORMED;      /* RFC 8446: no empty handshake fragment */
        return LB_CUR_BAD;
    }
    c->pos += LB_TLS_RECORD_HEADER;
    c->rec_end = c->pos + rlen;
    return LB_CUR_OK;
}

/* Reads n bytes of the handshake stream into out (NULL: skips them). */
static int
lb_hello_take(struct lb_hello_cur *c, size_t n, uint8_t *out)
{
    while (n > 0) {
        size_t in_rec, avail, k;
        int rc;

        if (c->pos == c->rec_end && (rc = lb_hello_next_record(c, false)) != LB_CUR_OK)
            return rc;
        in_rec = c->rec_end - c->pos;
        avail = c->len - c->pos;
        k = n < in_rec ? n : in_rec;
        if (avail < k)
            return lb_hello_want(c, c->pos + k);
        if (out != NULL) {
            memcpy(out, c->buf + c->pos, k);
            out += k;
        }
        c->pos += k;
        n -= k;
    }
    return LB_CUR_OK;
}

/* A big-endian length of n (1..3) bytes. */
static int
lb_hello_len(struct lb_hello_cur *c, size_t n, size_t *out)
{
    uint8_t b[3];
    int rc = lb_hello_take(c, n, b);

    *out = 0;
    for (size_t i = 0; rc == LB_CUR_OK && i < n; i++)
        *out = *out << 8 | b[i];
    return rc;
}

/* A host name as a name route compares it: labels of [A-Za-z0-9_-] of
 * 1..63 bytes, at most LB_SNI_NAME_MAX without one trailing dot; written
 * lower case. An IP address (which RFC 6066 forbids there, and some
 * clients send) passes as digits and dots. */
static bool
lb_hello_name_ok(uint8_t *s, size_t *len)
{
    size_t label = 0, n = *len;

    if (n > 0 && s[n - 1] == '.')
        n--;
    if (n == 0 || n > LB_SNI_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = s[i];

        if (ch == '.') {
            if (label == 0)
                return false;
            label = 0;
            continue;
        }
        if (ch >= 'A' && ch <= 'Z')
            s[i] = (uint8_t)(ch - 'A' + 'a');
        else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                   ch == '_'))
            return false;
        if (++label > 63)
            return false;
    }
    *len = n;
    return true;
}

/* The server_name extension's body (RFC 6066 section 3), ext_len bytes:
 * the first host_name entry, or "" when it has none. */
static int
lb_hello_server_name(struct lb_hello_cur *c, size_t ext_len, char *name)
{
    uint8_t host[LB_SNI_NAME_MAX + 2];
    size_t list_len, used = 2;
    bool found = false;
    int rc;

    if (ext_len < 2) {
        c->bad = LB_SNI_MALFORMED;
        return LB_CUR_BAD;
    }
    if ((rc = lb_hello_len(c, 2, &list_len)) != LB_CUR_OK)
        return rc;
    if (list_len != ext_len - 2) {
        c->bad = LB_SNI_MALFORMED;
        return LB_CUR_BAD;
    }
    while (used < ext_len) {
        size_t type, n;

        if (ext_len - used < 3) {
            c->bad = LB_SNI_MALFORMED;
            return LB_CUR_BAD;
        }
        if ((rc = lb_hello_len(c, 1, &type)) != LB_CUR_OK ||
            (rc = lb_hello_len(c, 2, &n)) != LB_CUR_OK)
            return rc;
        used += 3;
        if (n > ext_len - used) {
            c->bad = LB_SNI_MALFORMED;
            return LB_CUR_BAD;
        }
        if (type != LB_TLS_NAME_HOST || found) {
            if ((rc = lb_hello_take(c, n, NULL)) != LB_CUR_OK)
                return rc;
        } else {
            /* One trailing dot may take the name to LB_SNI_NAME_MAX + 1. */
            if (n > LB_SNI_NAME_MAX + 1) {
                c->bad = LB_SNI_MALFORMED;
                return LB_CUR_BAD;
            }
            if ((rc = lb_hello_take(c, n, host)) != LB_CUR_OK)
                return rc;
            if (!lb_hello_name_ok(host, &n)) {
                c->bad = LB_SNI_MALFORMED;
                return LB_CUR_BAD;
            }
            memcpy(name, host, n);
            name[n] = '\0';
            found = true;
        }
        used += n;
    }
    if (!found)
        name[0] = '\0';
    return LB_CUR_OK;
}

/* The ClientHello's body after its 4-byte header, body bytes long (RFC
 * 8446 section 4.1.2): the fields before the extensions are skipped,
 * checked only for fitting. */
static int
lb_hello_body(struct lb_hello_cur *c, size_t body, char *name)
{
    size_t used = 0, n, ext_total;
    int rc;

    /* legacy_version and random */
    if (body < 2 + 32 + 1) {
        c->bad = LB_SNI_MALFORMED;
        return LB_CUR_BAD;
    }
    if ((rc = lb_hello_take(c, 2 + 32, NULL)) != LB_CUR_OK)
        return rc;
    used = 2 + 32;
    /* legacy_session_id <0..32> */
    if ((rc = lb_hello_len(c, 1, &n)) != LB_CUR_OK)
        return rc;
    used += 1;
    if (n > 32 || n + 2 > body - used) {
        c->bad = LB_SNI_MALFORMED;
        return LB_CUR_BAD;
    }
    if ((rc = lb_hello_take(c, n, NULL)) != LB_CUR_OK)
        return rc;
    used += n;
    /* cipher_suites <2..2^16-2>, two bytes each */
    if ((rc = lb_hello_len(c, 2, &n)) != LB_CUR_OK)
        return rc;
    used += 2;
    if (n < 2 || n % 2 != 0 || n + 1 > body - used) {
        c->bad = LB_SNI_MALFORMED;
        return LB_CUR_BAD;
    }
    if ((rc = lb_hello_take(c, n, NULL)) != LB_CUR_OK)
        return rc;
    used += n;
    /* legacy_compression_methods <1..2^8-1> */
    if ((rc = lb_hello_len(c, 1, &n)) != LB_CUR_OK)
        return rc;
    used += 1;
    if (n < 1 || n > body - used) {
        c->bad = LB_SNI_MALFORMED;
        return LB_CUR_BAD;
    }
    if ((rc = lb_hello_take(c, n, NULL)) != LB_CUR_OK)
        return rc;
    used += n;
    /* TLS 1.2 allows a hello without extensions: no name. */
    if (used == body) {
        name[0] = '\0';
        return LB_CUR_OK;
    }
    if (body - used < 2) {
        c->bad = LB_SNI_MALFORMED;
        return LB_CUR_BAD;
    }
    if ((rc = lb_hello_len(c, 2, &ext_total)) != LB_CUR_OK)
        return rc;
    used += 2;
    if (ext_total != body - used) {
        c->bad = LB_SNI_MALFORMED;
        return LB_CUR_BAD;
    }
    while (used < body) {
        size_t type, len;

        if (body - used < 4) {
            c->bad = LB_SNI_MALFORMED;
            return LB_CUR_BAD;
        }
        if ((rc = lb_hello_len(c, 2, &type)) != LB_CUR_OK ||
            (rc = lb_hello_len(c, 2, &len)) != LB_CUR_OK)
            return rc;
        used += 4;
        if (len > body - used) {
            c->bad = LB_SNI_MALFORMED;
            return LB_CUR_BAD;
        }
        /* What follows the name is the server's to read, not ours. */
        if (type == LB_TLS_EXT_SERVER_NAME)
            return lb_hello_server_name(c, len, name);
        if ((rc = lb_hello_take(c, len, NULL)) != LB_CUR_OK)
            return rc;
        used += len;
    }
    name[0] = '\0';
    return LB_CUR_OK;
}

int
lb_hello_sni(const uint8_t *buf, size_t len, size_t max, char *name, size_t *need,
             enum lb_sni_bad *bad)
{
    struct lb_hello_cur c = { .buf = buf, .len = len < max ? len : max, .max = max };
    char found[LB_SNI_NAME_MAX + 1];
    uint8_t type;
    size_t body;
    int rc;

    if ((rc = lb_hello_next_record(&c, true)) == LB_CUR_OK &&
        (rc = lb_hello_take(&c, 1, &type)) == LB_CUR_OK) {
        if (type != LB_TLS_CLIENT_HELLO) {
            c.bad = LB_SNI_NOT_TLS;
            rc = LB_CUR_BAD;
        } else if ((rc = lb_hello_len(&c, 3, &body)) == LB_CUR_OK) {
            /* Its length alone can say it will not fit: refused now, not
             * once max bytes have come. */
            if (body > max - c.pos) {
                c.bad = LB_SNI_TOO_LONG;
                rc = LB_CUR_BAD;
            } else {
                rc = lb_hello_body(&c, body, found);
            }
        }
    }
    if (rc == LB_CUR_OK) {
        memcpy(name, found, strlen(found) + 1);
        return 1;
    }
    if (rc == LB_CUR_BAD) {
        *bad = c.bad;
        return -1;
    }
    *need = c.need;
    return 0;
}
