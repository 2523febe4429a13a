/*
 * text.c - a text built line by line, under a lock, and written or sent
 * once the lock is released: the state file's body and a hand-over's
 * lines (lb/state/state.c, lb/reload/members.c, lb/handover/takeover.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"

char *
lb_text_room(struct lb_text *t, size_t n)
{
    size_t cap = t->cap ? t->cap : 1024;
    char *grown;

    if (t->is_failed)
        return NULL;
    while (cap - t->len <= n)           /* one more for the NUL */
        cap *= 2;
    if (cap != t->cap) {
        if ((grown = realloc(t->p, cap)) == NULL) {
            free(t->p);
            *t = (struct lb_text){ .is_failed = true };
            return NULL;
        }
        t->p = grown;
        t->cap = cap;
    }
    return t->p + t->len;
}

int
lb_text_printf(struct lb_text *t, const char *fmt, ...)
{
    va_list ap;
    char *at = lb_text_room(t, 256);
    int k;

    if (at == NULL)
        return -1;
    va_start(ap, fmt);
    k = vsnprintf(at, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (k >= 0 && (size_t)k >= t->cap - t->len) {     /* longer than 256: again */
        if ((at = lb_text_room(t, (size_t)k)) == NULL)
            return -1;
        va_start(ap, fmt);
        k = vsnprintf(at, t->cap - t->len, fmt, ap);
        va_end(ap);
    }
    if (k < 0)
        return -1;
    t->len += (size_t)k;
    return 0;
}

char *
lb_text_take(struct lb_text *t, size_t *len)
{
    if (t->p == NULL && !t->is_failed && lb_text_room(t, 0) != NULL)
        t->p[0] = '\0';                 /* nothing added: an empty text */
    *len = t->len;
    return t->p;
}
