/*
 * talk_mysql.c - the mysql check: the server's greeting, with check_user a
 * login with an empty password, with check_role the read_only variable,
 * then COM_QUIT.
 *
 *   GREETING --no user--> pass ("MySQL 10.11.19-MariaDB")
 *      | HandshakeResponse41 (check_user, no password)
 *   LOGIN --OK, role any--> pass, COM_QUIT
 *      | (AuthSwitchRequest: an empty answer, once)
 *      | COM_QUERY SELECT @@global.read_only
 *   COLUMNS -> DEFINITIONS -> ROW: 0 is a primary, 1 a replica; COM_QUIT
 *
 * An ERR packet at any step fails with its code and message, as the server
 * wrote them ("MySQL 1045 Access denied for user ..."). The protocol is
 * MySQL's client/server protocol, which MariaDB speaks: packets of a 3-byte
 * little-endian length, a sequence number, the payload.
 */
#include <stdio.h>
#include <string.h>

#include "talk.h"

enum {
    MY_GREETING = 0,
    MY_LOGIN,
    MY_LOGIN_SWITCHED,              /* after our answer to an auth switch */
    MY_COLUMNS,
    MY_DEFINITIONS,
    MY_ROW,
};

/* Capability flags (include/mysql_com.h). */
#define MY_CLIENT_LONG_PASSWORD 0x00000001u
#define MY_CLIENT_PROTOCOL_41 0x00000200u
#define MY_CLIENT_SECURE_CONNECTION 0x00008000u
#define MY_CLIENT_PLUGIN_AUTH 0x00080000u

#define MY_HEADER 4
#define MY_COM_QUIT 0x01
#define MY_COM_QUERY 0x03
#define MY_ROLE_QUERY "SELECT @@global.read_only"
#define MY_CHARSET_UTF8 33          /* utf8_general_ci */

const char *
hc_talk_mysql_waiting_for(const struct hc_talk *t)
{
    switch (t->step) {
    case MY_GREETING:
        return "the MySQL greeting";
    case MY_LOGIN:
    case MY_LOGIN_SWITCHED:
        return "the MySQL login answer";
    default:
        return "the MySQL read_only answer";
    }
}

enum hc_talk_next
hc_talk_mysql_begin(struct hc_talk *t)
{
    t->step = MY_GREETING;
    t->seq = 0;
    return HC_TALK_READ;                /* the server speaks first */
}

static uint32_t
my_le(const unsigned char *p, size_t n)
{
    uint32_t v = 0;

    for (size_t i = 0; i < n; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

/* Appends a packet with the next sequence number to out. */
static void
my_send(struct hc_talk *t, const unsigned char *payload, size_t len)
{
    unsigned char *o = t->out + t->out_len;

    o[0] = (unsigned char)len;
    o[1] = (unsigned char)(len >> 8);
    o[2] = (unsigned char)(len >> 16);
    o[3] = t->seq++;
    if (len > 0)
        memcpy(o + MY_HEADER, payload, len);
    t->out_len += MY_HEADER + len;
}

static enum hc_talk_next
my_quit(struct hc_talk *t)
{
    static const unsigned char quit = MY_COM_QUIT;

    t->out_len = 0;
    t->seq = 0;                         /* a command starts a new sequence */
    my_send(t, &quit, 1);
    return HC_TALK_DONE;
}

/* ERR packet: 0xff, the code, with protocol 4.1 '#' and a 5-character
 * SQLSTATE (not before the greeting), the message. */
static enum hc_talk_next
my_error(struct hc_talk *t, const unsigned char *p, size_t n)
{
    char msg[HC_DETAIL_MAX];
    size_t off = 3;

    if (n < 3)
        return hc_talk_verdict(t, false, "MySQL error packet too short (%zu bytes)", n);
    if (n >= 9 && p[3] == '#')
        off = 9;
    hc_talk_text(msg, sizeof(msg), p + off, n - off);
    return hc_talk_verdict(t, false, "MySQL %u %s", (unsigned)my_le(p + 1, 2), msg);
}

/* The packet at the front of in: 1 with its payload, 0 when it is not all
 * there yet, -1 when it is longer than the buffer or out of sequence (then
 * the verdict is set). */
static int
my_packet(struct hc_talk *t, const unsigned char **payload, size_t *len)
{
    uint32_t n;

    if (t->in_len < MY_HEADER)
        return 0;
    n = my_le(t->in, 3);
    if (n > HC_TALK_IN_MAX - MY_HEADER) {
        hc_talk_verdict(t, false, "MySQL packet of %u bytes, longer than the %d read "
                        "(while waiting for %s)", (unsigned)n, HC_TALK_IN_MAX - MY_HEADER,
                        hc_talk_mysql_waiting_for(t));
        return -1;
    }
    if (t->in[3] != t->seq) {
        hc_talk_verdict(t, false, "MySQL packet number %u where %u was due (while waiting "
                        "for %s)", t->in[3], t->seq, hc_talk_mysql_waiting_for(t));
        return -1;
    }
    if (t->in_len < MY_HEADER + n)
        return 0;
    *payload = t->in + MY_HEADER;
    *len = n;
    return 1;
}

/* HandshakeResponse41 for check_user with an empty password. */
static void
my_login(struct hc_talk *t, uint32_t server_caps)
{
    static const char plugin[] = "mysql_native_password";
    unsigned char r[HC_TALK_OUT_MAX - MY_HEADER];
    uint32_t caps = MY_CLIENT_LONG_PASSWORD | MY_CLIENT_PROTOCOL_41 | MY_CLIENT_SECURE_CONNECTION;
    size_t ulen = strlen(t->user), n = 0;

    caps |= server_caps & MY_CLIENT_PLUGIN_AUTH;
    memset(r, 0, 32);
    for (int i = 0; i < 4; i++)
        r[i] = (unsigned char)(caps >> (8 * i));
    r[7] = 1;                           /* max packet 16 MiB */
    r[8] = MY_CHARSET_UTF8;
    n = 32;                             /* then 23 reserved zero bytes */
    memcpy(r + n, t->user, ulen + 1);
    n += ulen + 1;
    r[n++] = 0;                         /* auth response: empty */
    if (caps & MY_CLIENT_PLUGIN_AUTH) {
        memcpy(r + n, plugin, sizeof(plugin));
        n += sizeof(plugin);
    }
    my_send(t, r, n);
}

static enum hc_talk_next
my_greeting(struct hc_talk *t, const unsigned char *p, size_t n)
{
    const unsigned char *end = p + n, *v, *nul;
    uint32_t caps;

    if (n > 0 && p[0] == 0xff)
        return my_error(t, p, n);
    if (n == 0 || p[0] != 10)
        return hc_talk_verdict(t, false, "not a MySQL greeting: protocol version %u where 10 "
                               "was due", n ? p[0] : 0u);
    v = p + 1;
    nul = memchr(v, '\0', (size_t)(end - v));
    /* version, then connection id (4), auth data (8), filler, capabilities */
    if (nul == NULL || end - nul < 1 + 4 + 8 + 1 + 2)
        return hc_talk_verdict(t, false, "malformed MySQL greeting (%zu bytes)", n);
    /* MariaDB prefixes its version with "5.5.5-" for old clients. */
    if (nul - v > 6 && memcmp(v, "5.5.5-", 6) == 0)
        v += 6;
    hc_talk_text(t->version, sizeof(t->version), v, (size_t)(nul - v));
    caps = my_le(nul + 1 + 4 + 8 + 1, 2);
    if (end - nul >= 1 + 4 + 8 + 1 + 2 + 1 + 2 + 2)
        caps |= my_le(nul + 1 + 4 + 8 + 1 + 2 + 1 + 2, 2) << 16;
    if (t->user[0] == '\0')
        return hc_talk_verdict(t, true, "MySQL %s", t->version);
    if (!(caps & MY_CLIENT_PROTOCOL_41))
        return hc_talk_verdict(t, false, "MySQL %s does not speak protocol 4.1", t->version);
    hc_talk_consume(t, MY_HEADER + n);
    t->step = MY_LOGIN;
    my_login(t, caps);
    return HC_TALK_SEND;
}

static enum hc_talk_next
my_query_role(struct hc_talk *t)
{
    unsigned char q[1 + sizeof(MY_ROLE_QUERY) - 1];

    q[0] = MY_COM_QUERY;
    memcpy(q + 1, MY_ROLE_QUERY, sizeof(MY_ROLE_QUERY) - 1);
    t->seq = 0;
    my_send(t, q, sizeof(q));
    t->step = MY_COLUMNS;
    return HC_TALK_SEND;
}

static enum hc_talk_next
my_login_answer(struct hc_talk *t, const unsigned char *p, size_t n)
{
    char plugin[64];
    const unsigned char *nul;

    switch (n > 0 ? p[0] : 0x100) {
    case 0x00:                          /* OK */
        hc_talk_consume(t, MY_HEADER + n);
        if (t->role == CONF_ROLE_ANY) {
            hc_talk_verdict(t, true, "MySQL %s, login ok", t->version);
            return my_quit(t);
        }
        return my_query_role(t);
    case 0xff:
        return my_error(t, p, n);
    case 0xfe:                          /* AuthSwitchRequest: plugin name, data */
        nul = memchr(p + 1, '\0', n - 1);
        hc_talk_text(plugin, sizeof(plugin), p + 1, nul ? (size_t)(nul - p - 1) : n - 1);
        if (t->step == MY_LOGIN_SWITCHED)
            return hc_talk_verdict(t, false, "MySQL asks again for authentication (%s): "
                                   "check_user must have no password", plugin);
        hc_talk_consume(t, MY_HEADER + n);
        t->step = MY_LOGIN_SWITCHED;
        my_send(t, NULL, 0);            /* the empty password, in any plugin */
        return HC_TALK_SEND;
    case 0x01:                          /* AuthMoreData: a password is needed */
        return hc_talk_verdict(t, false, "MySQL asks for more authentication data: "
                               "check_user must have no password");
    default:
        return hc_talk_verdict(t, false, "MySQL answered the login with packet type "
                               "0x%02x", n > 0 ? p[0] : 0u);
    }
}

/* A length-encoded integer at p (n bytes): its size, or 0 when malformed. */
static size_t
my_lenenc(const unsigned char *p, size_t n, uint64_t *v)
{
    static const unsigned char sizes[] = { 3, 4, 9 };   /* 0xfc, 0xfd, 0xfe */

    if (n == 0 || p[0] == 0xfb || p[0] == 0xff)
        return 0;
    if (p[0] < 0xfb) {
        *v = p[0];
        return 1;
    }
    if (n < sizes[p[0] - 0xfc])
        return 0;
    *v = 0;
    for (size_t i = 1; i < sizes[p[0] - 0xfc]; i++)
        *v |= (uint64_t)p[i] << (8 * (i - 1));
    return sizes[p[0] - 0xfc];
}

static enum hc_talk_next
my_role_row(struct hc_talk *t, const unsigned char *p, size_t n)
{
    const char *want = t->role == CONF_ROLE_PRIMARY ? "primary" : "replica";
    uint64_t len;
    size_t h = my_lenenc(p, n, &len);
    bool is_replica;

    if (n > 0 && p[0] == 0xfb)
        return hc_talk_verdict(t, false, "MySQL read_only is NULL");
    if (h == 0 || len != 1 || h + 1 > n || (p[h] != '0' && p[h] != '1'))
        return hc_talk_verdict(t, false, "MySQL read_only answer is not 0 or 1");
    is_replica = p[h] == '1';
    if (is_replica == (t->role == CONF_ROLE_REPLICA))
        hc_talk_verdict(t, true, "MySQL read_only=%d (%s)", is_replica, want);
    else
        hc_talk_verdict(t, false, "MySQL read_only=%d: a %s, check_role = %s", is_replica,
                        is_replica ? "replica" : "primary", want);
    hc_talk_consume(t, MY_HEADER + n);
    return my_quit(t);
}

enum hc_talk_next
hc_talk_mysql_step(struct hc_talk *t)
{
    const unsigned char *p;
    size_t n;
    uint64_t v;
    int rc;

    while ((rc = my_packet(t, &p, &n)) == 1) {
        t->seq++;
        if (t->step == MY_GREETING)
            return my_greeting(t, p, n);
        if (t->step == MY_LOGIN || t->step == MY_LOGIN_SWITCHED)
            return my_login_answer(t, p, n);
        if (n > 0 && p[0] == 0xff)
            return my_error(t, p, n);
        switch (t->step) {
        case MY_COLUMNS:
            if (my_lenenc(p, n, &v) == 0 || v == 0)
                return hc_talk_verdict(t, false, "MySQL read_only answer without a column");
            t->skip = v;
            t->step = MY_DEFINITIONS;
            break;
        case MY_DEFINITIONS:
            if (--t->skip == 0)
                t->step = MY_ROW;
            break;
        default:
            /* An EOF packet (0xfe, short) ends the definitions unless the
             * client asked for CLIENT_DEPRECATE_EOF, which we do not. */
            if (n > 0 && n < 9 && p[0] == 0xfe)
                break;
            return my_role_row(t, p, n);
        }
        hc_talk_consume(t, MY_HEADER + n);
    }
    return rc == 0 ? HC_TALK_READ : HC_TALK_DONE;
}
