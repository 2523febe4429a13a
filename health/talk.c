/*
 * talk.c - what the protocol conversations share: the dispatch by kind, the
 * input buffer, the verdict.
 */
#include "talk.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The protocols, by check kind. */
static const struct hc_talk_proto {
    enum hc_talk_next (*begin)(struct hc_talk *t);
    enum hc_talk_next (*step)(struct hc_talk *t);
    const char *(*waiting_for)(const struct hc_talk *t);
} hc_talk_protos[] = {
    [CONF_CHECK_MYSQL] = { hc_talk_mysql_begin, hc_talk_mysql_step, hc_talk_mysql_waiting_for },
    [CONF_CHECK_PGSQL] = { hc_talk_pgsql_begin, hc_talk_pgsql_step, hc_talk_pgsql_waiting_for },
    [CONF_CHECK_REDIS] = { hc_talk_redis_begin, hc_talk_redis_step, hc_talk_redis_waiting_for },
};

static const struct hc_talk_proto *
hc_talk_proto_of(enum conf_check kind)
{
    if ((size_t)kind >= sizeof(hc_talk_protos) / sizeof(hc_talk_protos[0]) ||
        hc_talk_protos[kind].begin == NULL)
        return NULL;
    return &hc_talk_protos[kind];
}

static enum hc_talk_next
hc_talk_no_proto(struct hc_talk *t)
{
    return hc_talk_verdict(t, false, "internal error: no conversation for check %s",
                           conf_check_name(t->kind));
}

enum hc_talk_next
hc_talk_begin(struct hc_talk *t, enum conf_check kind, const char *user, const char *database,
              enum conf_role role)
{
    const struct hc_talk_proto *proto = hc_talk_proto_of(kind);

    memset(t, 0, sizeof(*t));
    t->kind = kind;
    t->user = user;
    t->database = database;
    t->role = role;
    return proto != NULL ? proto->begin(t) : hc_talk_no_proto(t);
}

size_t
hc_talk_room(const struct hc_talk *t)
{
    return sizeof(t->in) - t->in_len;
}

enum hc_talk_next
hc_talk_feed(struct hc_talk *t, const void *buf, size_t n)
{
    const struct hc_talk_proto *proto = hc_talk_proto_of(t->kind);

    if (n > hc_talk_room(t))
        n = hc_talk_room(t);    /* the caller reads at most the room */
    if (n > 0)
        memcpy(t->in + t->in_len, buf, n);
    t->in_len += n;
    return proto != NULL ? proto->step(t) : hc_talk_no_proto(t);
}

const char *
hc_talk_waiting_for(const struct hc_talk *t)
{
    const struct hc_talk_proto *proto = hc_talk_proto_of(t->kind);

    return proto != NULL ? proto->waiting_for(t) : "the answer";
}

enum hc_talk_next
hc_talk_closed(struct hc_talk *t)
{
    return hc_talk_verdict(t, false, "connection closed while waiting for %s",
                           hc_talk_waiting_for(t));
}

enum hc_talk_next
hc_talk_verdict(struct hc_talk *t, bool passed, const char *fmt, ...)
{
    va_list ap;

    t->passed = passed;
    va_start(ap, fmt);
    vsnprintf(t->detail, sizeof(t->detail), fmt, ap);
    va_end(ap);
    return HC_TALK_DONE;
}

void
hc_talk_consume(struct hc_talk *t, size_t n)
{
    if (n >= t->in_len) {
        t->in_len = 0;
        return;
    }
    memmove(t->in, t->in + n, t->in_len - n);
    t->in_len -= n;
}

void
hc_talk_text(char *dst, size_t dstlen, const unsigned char *src, size_t len)
{
    size_t i;

    if (dstlen == 0)
        return;
    for (i = 0; i < len && i + 1 < dstlen; i++)
        dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? (char)src[i] : '?';
    dst[i] = '\0';
}
