/*
 * talk_pgsql.c - the pgsql check.
 *
 * Without check_user: an SSLRequest, which the server answers with one byte,
 * S or N, before any login: the postmaster forked a backend for us, which is
 * what a client needs first. With check_user: a StartupMessage for the user
 * and check_database, then
 *   - an authentication request (password, MD5, SCRAM, ...): pass, the
 *     server is alive and takes logins; the connection is closed without an
 *     answer, which PostgreSQL does not log (clients such as psql do it);
 *   - AuthenticationOk: not yet a pass, since with trust authentication a
 *     role or database that does not exist is refused only after it; pass on
 *     ReadyForQuery, then Terminate;
 *   - ErrorResponse: fail with its SQLSTATE and message ("PostgreSQL 53300
 *     sorry, too many clients already").
 * Messages are a type byte and a 4-byte big-endian length that counts
 * itself (protocol 3.0).
 */
#include <stdio.h>
#include <string.h>

#include "talk.h"

enum {
    PG_SSL = 0,                     /* waiting for S or N */
    PG_AUTH,                        /* the answer to the startup message */
    PG_READY,                       /* after AuthenticationOk */
};

#define PG_SSL_REQUEST 80877103u    /* 1234 << 16 | 5679 */
#define PG_PROTOCOL_3 196608u       /* 3 << 16 */

const char *
hc_talk_pgsql_waiting_for(const struct hc_talk *t)
{
    switch (t->step) {
    case PG_SSL:
        return "the PostgreSQL answer to the SSLRequest";
    case PG_AUTH:
        return "the PostgreSQL answer to the startup message";
    default:
        return "PostgreSQL's ReadyForQuery";
    }
}

static void
pg_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t
pg_get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Appends "key\0value\0" to the startup message being built. */
static void
pg_param(struct hc_talk *t, const char *key, const char *value)
{
    size_t k = strlen(key) + 1, v = strlen(value) + 1;

    memcpy(t->out + t->out_len, key, k);
    memcpy(t->out + t->out_len + k, value, v);
    t->out_len += k + v;
}

enum hc_talk_next
hc_talk_pgsql_begin(struct hc_talk *t)
{
    if (t->user[0] == '\0') {
        pg_put32(t->out, 8);
        pg_put32(t->out + 4, PG_SSL_REQUEST);
        t->out_len = 8;
        t->step = PG_SSL;
        return HC_TALK_SEND;
    }
    t->out_len = 8;
    pg_param(t, "user", t->user);
    pg_param(t, "database", t->database[0] != '\0' ? t->database : t->user);
    pg_param(t, "application_name", "lb-health");
    t->out[t->out_len++] = '\0';
    pg_put32(t->out, (uint32_t)t->out_len);
    pg_put32(t->out + 4, PG_PROTOCOL_3);
    t->step = PG_AUTH;
    return HC_TALK_SEND;
}

/* ErrorResponse fields: a type byte and a NUL-ended string each, then a
 * NUL. C is the SQLSTATE, M the message. */
static enum hc_talk_next
pg_error(struct hc_talk *t, const unsigned char *p, size_t n)
{
    char code[8] = "", msg[HC_DETAIL_MAX] = "";
    size_t i = 0;

    while (i < n && p[i] != '\0') {
        unsigned char type = p[i++];
        const unsigned char *nul = memchr(p + i, '\0', n - i);
        size_t len = nul ? (size_t)(nul - (p + i)) : n - i;

        if (type == 'C')
            hc_talk_text(code, sizeof(code), p + i, len);
        else if (type == 'M')
            hc_talk_text(msg, sizeof(msg), p + i, len);
        i += len + 1;
    }
    if (code[0] == '\0' && msg[0] == '\0')
        return hc_talk_verdict(t, false, "PostgreSQL error without a code or message");
    return hc_talk_verdict(t, false, "PostgreSQL %s%s%s", code, code[0] && msg[0] ? " " : "",
                           msg);
}

static const char *
pg_auth_name(uint32_t code)
{
    switch (code) {
    case 2:
        return "Kerberos";
    case 3:
        return "a password";
    case 5:
        return "an MD5 password";
    case 7:
        return "GSSAPI";
    case 9:
        return "SSPI";
    case 10:
        return "SASL (SCRAM)";
    default:
        return "authentication";
    }
}

static enum hc_talk_next
pg_ssl_answer(struct hc_talk *t)
{
    unsigned char c = t->in[0];

    if (c == 'S' || c == 'N')
        return hc_talk_verdict(t, true, "PostgreSQL answered the SSLRequest (%c)", c);
    if (c == 'E')                       /* a server too old for SSL */
        return hc_talk_verdict(t, false, "PostgreSQL refused the SSLRequest");
    return hc_talk_verdict(t, false, "not PostgreSQL: byte 0x%02x where S or N was due", c);
}

enum hc_talk_next
hc_talk_pgsql_step(struct hc_talk *t)
{
    if (t->step == PG_SSL)
        return t->in_len > 0 ? pg_ssl_answer(t) : HC_TALK_READ;
    while (t->in_len >= 5) {
        unsigned char type = t->in[0];
        uint32_t len = pg_get32(t->in + 1);
        const unsigned char *body = t->in + 5;

        if (len < 4)
            return hc_talk_verdict(t, false, "malformed PostgreSQL message '%c' (length %u)",
                                   type >= 0x20 && type < 0x7f ? type : '?', (unsigned)len);
        if (len > HC_TALK_IN_MAX - 1)
            return hc_talk_verdict(t, false, "PostgreSQL message of %u bytes, longer than "
                                   "the %d read (while waiting for %s)", (unsigned)len,
                                   HC_TALK_IN_MAX - 1, hc_talk_pgsql_waiting_for(t));
        if (t->in_len < 1 + (size_t)len)
            return HC_TALK_READ;
        if (type == 'E')
            return pg_error(t, body, len - 4);
        if (t->step == PG_AUTH && type == 'R') {
            uint32_t code = len >= 8 ? pg_get32(body) : 0xffffffffu;

            if (code == 0xffffffffu)
                return hc_talk_verdict(t, false, "malformed PostgreSQL authentication request");
            if (code != 0)
                return hc_talk_verdict(t, true, "PostgreSQL asks for %s (alive)",
                                       pg_auth_name(code));
            t->step = PG_READY;
        } else if (t->step == PG_READY && type == 'Z') {
            hc_talk_verdict(t, true, "PostgreSQL login ok");
            t->out[0] = 'X';            /* Terminate */
            pg_put32(t->out + 1, 4);
            t->out_len = 5;
            return HC_TALK_DONE;
        } else if (type != 'S' && type != 'K' && type != 'N' && type != 'v') {
            /* ParameterStatus, BackendKeyData, NoticeResponse and
             * NegotiateProtocolVersion may come; anything else may not. */
            return hc_talk_verdict(t, false, "PostgreSQL sent message '%c' while we waited "
                                   "for %s", type >= 0x20 && type < 0x7f ? type : '?',
                                   hc_talk_pgsql_waiting_for(t));
        }
        hc_talk_consume(t, 1 + (size_t)len);
    }
    return HC_TALK_READ;
}
