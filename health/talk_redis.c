/*
 * talk_redis.c - the redis check: PING, and with check_role ROLE in the
 * same write (pipelined: one round trip).
 *
 * +PONG passes. An error fails with its text ("Redis LOADING Redis is
 * loading the dataset in memory", "-BUSY", "-MASTERDOWN", ...), except
 * -NOAUTH: a server that asks for a password is alive and answering, and
 * lb has no password to give, so it passes (noted in the detail) unless a
 * role is asked for, which then cannot be known. ROLE's answer is an array
 * whose first element is "master", "slave" or "sentinel"; the rest of it is
 * not read. Nothing is sent at the end: closing is how Redis clients leave.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "talk.h"

enum {
    RD_PONG = 0,
    RD_ROLE,                        /* the array header, *N */
    RD_ROLE_BULK,                   /* $len of its first element */
    RD_ROLE_NAME,
};

const char *
hc_talk_redis_waiting_for(const struct hc_talk *t)
{
    return t->step == RD_PONG ? "the Redis PONG" : "the Redis ROLE answer";
}

enum hc_talk_next
hc_talk_redis_begin(struct hc_talk *t)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    static const char role[] = "*1\r\n$4\r\nROLE\r\n";

    memcpy(t->out, ping, sizeof(ping) - 1);
    t->out_len = sizeof(ping) - 1;
    if (t->role != CONF_ROLE_ANY) {
        memcpy(t->out + t->out_len, role, sizeof(role) - 1);
        t->out_len += sizeof(role) - 1;
    }
    t->step = RD_PONG;
    return HC_TALK_SEND;
}

/* The role asked for, by Redis's name. */
static const char *
rd_role_wanted(const struct hc_talk *t)
{
    return t->role == CONF_ROLE_PRIMARY ? "master" : "slave";
}

static enum hc_talk_next
rd_line(struct hc_talk *t, const char *line)
{
    long n;
    char *end;

    if (line[0] == '-') {
        if (t->step == RD_PONG && strncmp(line + 1, "NOAUTH", 6) == 0 && t->role == CONF_ROLE_ANY)
            return hc_talk_verdict(t, true, "Redis %s (alive; lb sends no password)", line + 1);
        return hc_talk_verdict(t, false, "Redis %s", line + 1);
    }
    switch (t->step) {
    case RD_PONG:
        if (strcmp(line, "+PONG") != 0)
            return hc_talk_verdict(t, false, "Redis answered \"%s\" to PING", line);
        if (t->role == CONF_ROLE_ANY)
            return hc_talk_verdict(t, true, "Redis PONG");
        t->step = RD_ROLE;
        return HC_TALK_READ;
    case RD_ROLE:
        n = line[0] == '*' ? strtol(line + 1, &end, 10) : 0;
        if (n < 1 || *end != '\0')
            return hc_talk_verdict(t, false, "Redis answered \"%s\" to ROLE", line);
        t->step = RD_ROLE_BULK;
        return HC_TALK_READ;
    case RD_ROLE_BULK:
        n = line[0] == '$' ? strtol(line + 1, &end, 10) : 0;
        if (n < 1 || *end != '\0')
            return hc_talk_verdict(t, false, "Redis ROLE answer starts with \"%s\"", line);
        t->step = RD_ROLE_NAME;
        return HC_TALK_READ;
    default:
        if (strcmp(line, rd_role_wanted(t)) == 0)
            return hc_talk_verdict(t, true, "Redis role %s", line);
        return hc_talk_verdict(t, false, "Redis role %s, check_role = %s", line,
                               t->role == CONF_ROLE_PRIMARY ? "primary" : "replica");
    }
}

enum hc_talk_next
hc_talk_redis_step(struct hc_talk *t)
{
    enum hc_talk_next next = HC_TALK_READ;

    while (next == HC_TALK_READ) {
        unsigned char *lf = memchr(t->in, '\n', t->in_len);
        size_t len;
        char line[HC_DETAIL_MAX];

        if (lf == NULL) {
            if (t->in_len < HC_TALK_IN_MAX)
                return HC_TALK_READ;
            return hc_talk_verdict(t, false, "Redis line longer than %d bytes (while waiting "
                                   "for %s)", HC_TALK_IN_MAX, hc_talk_redis_waiting_for(t));
        }
        len = (size_t)(lf - t->in);
        if (len > 0 && t->in[len - 1] == '\r')
            len--;                      /* RESP ends lines with CRLF */
        if (len == 0)
            return hc_talk_verdict(t, false, "Redis sent an empty line while we waited for %s",
                                   hc_talk_redis_waiting_for(t));
        hc_talk_text(line, sizeof(line), t->in, len);
        hc_talk_consume(t, (size_t)(lf - t->in) + 1);
        next = rd_line(t, line);
    }
    return next;
}
