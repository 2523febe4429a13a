/*
 * talk.h - the protocol checks (mysql, pgsql, redis) as pure conversations.
 *
 * A conversation is fed the bytes its server sends and says what to send
 * next and, at the end, the verdict with the protocol's own words as the
 * detail ("MySQL 1040 Too many connections", "PostgreSQL 53300 sorry, too
 * many clients already", "Redis LOADING Redis is loading the dataset in
 * memory"). probe.c moves the bytes; nothing here touches a socket, so
 * every path is unit-tested on captured and hand-made packets.
 *
 * Memory is bounded: a message is kept only until it is complete, in
 * HC_TALK_IN_MAX bytes. A longer one (its header says so, or a Redis line
 * fills the buffer without its end) fails the check: an endless or oversized
 * packet costs this buffer, never more.
 */
#ifndef HC_TALK_H
#define HC_TALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "hc.h"

#define HC_TALK_IN_MAX 1024
/* The longest message sent: a PostgreSQL startup message with a user and a
 * database of CONF_CHECK_NAME_MAX bytes each (283 bytes). */
#define HC_TALK_OUT_MAX 320

enum hc_talk_next {
    HC_TALK_READ = 0,               /* wait for more bytes */
    HC_TALK_SEND,                   /* send out[0..out_len), then read */
    HC_TALK_DONE,                   /* passed and detail are the verdict;
                                       out holds the goodbye (COM_QUIT,
                                       Terminate), sent once if it fits */
};

struct hc_talk {
    enum conf_check kind;
    const char *user;               /* "" = no login step */
    const char *database;           /* pgsql: "" = the user's name */
    enum conf_role role;
    int step;                       /* the protocol's own */
    uint64_t skip;                  /* mysql: column definitions to pass */
    uint8_t seq;                    /* mysql: the next packet's number */
    bool passed;
    char detail[HC_DETAIL_MAX];
    char version[48];               /* mysql: from the greeting */
    size_t in_len;
    size_t out_len;
    unsigned char in[HC_TALK_IN_MAX];
    unsigned char out[HC_TALK_OUT_MAX];
};

/* Starts a conversation for a check of kind (mysql, pgsql or redis); the
 * strings must outlive it. SEND when the client speaks first (pgsql, redis),
 * READ when the server does (mysql's greeting). */
enum hc_talk_next hc_talk_begin(struct hc_talk *t, enum conf_check kind, const char *user,
                                const char *database, enum conf_role role);

/* n more bytes came (n <= hc_talk_room(t)). After SEND the caller sends out,
 * sets out_len to 0 and feeds again, with n = 0 when bytes are left in in
 * (so the verdict does not depend on how the server's bytes were split). */
enum hc_talk_next hc_talk_feed(struct hc_talk *t, const void *buf, size_t n);

/* Room for the next read: what feed takes at most. */
size_t hc_talk_room(const struct hc_talk *t);

/* The server closed the connection: DONE, failed, naming what was awaited. */
enum hc_talk_next hc_talk_closed(struct hc_talk *t);

/* What the conversation waits for, for a timeout's detail ("the MySQL
 * greeting"). */
const char *hc_talk_waiting_for(const struct hc_talk *t);

/* The protocols (talk_mysql.c, talk_pgsql.c, talk_redis.c), called by the
 * dispatch in talk.c: begin fills out or not; step reads the complete
 * messages at the front of in, consuming each (hc_talk_consume). */
enum hc_talk_next hc_talk_mysql_begin(struct hc_talk *t);
enum hc_talk_next hc_talk_mysql_step(struct hc_talk *t);
const char *hc_talk_mysql_waiting_for(const struct hc_talk *t);
enum hc_talk_next hc_talk_pgsql_begin(struct hc_talk *t);
enum hc_talk_next hc_talk_pgsql_step(struct hc_talk *t);
const char *hc_talk_pgsql_waiting_for(const struct hc_talk *t);
enum hc_talk_next hc_talk_redis_begin(struct hc_talk *t);
enum hc_talk_next hc_talk_redis_step(struct hc_talk *t);
const char *hc_talk_redis_waiting_for(const struct hc_talk *t);

/* Shared by the protocols. */
enum hc_talk_next hc_talk_verdict(struct hc_talk *t, bool passed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Drops the first n bytes of in (a message read). */
void hc_talk_consume(struct hc_talk *t, size_t n);
/* Copies len bytes of a server's text into dst (size dstlen, NUL-ended),
 * each byte outside printable ASCII as '?': a detail goes into logs and
 * JSON. */
void hc_talk_text(char *dst, size_t dstlen, const unsigned char *src, size_t len);

#endif /* HC_TALK_H */
