/*
 * Kafka records to and from Arrow-layout buffers with librdkafka's batch APIs, with no object per record.
 *
 * Reading (dk_open/dk_consume/dk_fill): a batch of one partition's records becomes value/key offsets and bytes,
 * null flags, offsets and timestamps in two calls. Producing (dk_producer_*): a binary array of values (and
 * optionally keys) is enqueued with one rd_kafka_produce_batch call per batch.
 *
 * Built and loaded by dagger/arrow_kafka.py against the librdkafka that confluent-kafka bundles, so
 * nothing but a C compiler is needed. librdkafka's public ABI is declared here instead of including
 * <librdkafka/rdkafka.h> (the wheel ships no headers); these declarations are stable across librdkafka 1.x-2.x.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <limits.h>
#include <sys/types.h>

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_topic_partition_list_s rd_kafka_topic_partition_list_t;

typedef struct rd_kafka_message_s {
    int err;
    rd_kafka_topic_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

#define RD_KAFKA_PRODUCER 0
#define RD_KAFKA_CONSUMER 1
#define RD_KAFKA_CONF_OK 0
#define RD_KAFKA_RESP_ERR__PARTITION_EOF (-191)
#define RD_KAFKA_RESP_ERR__QUEUE_FULL (-184)
#define RD_KAFKA_MSG_F_COPY 0x2

rd_kafka_conf_t *rd_kafka_conf_new(void);
int rd_kafka_conf_set(rd_kafka_conf_t *conf, const char *name, const char *value, char *errstr, size_t errstr_size);
void rd_kafka_conf_destroy(rd_kafka_conf_t *conf);
rd_kafka_t *rd_kafka_new(int type, rd_kafka_conf_t *conf, char *errstr, size_t errstr_size);
int rd_kafka_poll_set_consumer(rd_kafka_t *rk);
rd_kafka_topic_partition_list_t *rd_kafka_topic_partition_list_new(int size);
void *rd_kafka_topic_partition_list_add(rd_kafka_topic_partition_list_t *list, const char *topic, int32_t partition);
int rd_kafka_topic_partition_list_set_offset(rd_kafka_topic_partition_list_t *list, const char *topic,
                                             int32_t partition, int64_t offset);
void rd_kafka_topic_partition_list_destroy(rd_kafka_topic_partition_list_t *list);
int rd_kafka_assign(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *partitions);
rd_kafka_queue_t *rd_kafka_queue_get_consumer(rd_kafka_t *rk);
void rd_kafka_queue_destroy(rd_kafka_queue_t *rkqu);
ssize_t rd_kafka_consume_batch_queue(rd_kafka_queue_t *rkqu, int timeout_ms, rd_kafka_message_t **rkmessages,
                                     size_t rkmessages_size);
int64_t rd_kafka_message_timestamp(const rd_kafka_message_t *rkmessage, int *tstype);
void rd_kafka_message_destroy(rd_kafka_message_t *rkmessage);
const char *rd_kafka_err2str(int err);
int rd_kafka_consumer_close(rd_kafka_t *rk);
void rd_kafka_destroy(rd_kafka_t *rk);
void rd_kafka_conf_set_dr_msg_cb(rd_kafka_conf_t *conf,
                                 void (*dr_msg_cb)(rd_kafka_t *rk, const rd_kafka_message_t *rkmessage, void *opaque));
void rd_kafka_conf_set_opaque(rd_kafka_conf_t *conf, void *opaque);
void rd_kafka_conf_set_log_cb(rd_kafka_conf_t *conf,
                              void (*log_cb)(const rd_kafka_t *rk, int level, const char *fac, const char *buf));
rd_kafka_topic_t *rd_kafka_topic_new(rd_kafka_t *rk, const char *topic, void *conf);
void rd_kafka_topic_destroy(rd_kafka_topic_t *rkt);
int rd_kafka_produce_batch(rd_kafka_topic_t *rkt, int32_t partition, int msgflags, rd_kafka_message_t *rkmessages,
                           int message_cnt);
int rd_kafka_poll(rd_kafka_t *rk, int timeout_ms);
int rd_kafka_flush(rd_kafka_t *rk, int timeout_ms);
int rd_kafka_outq_len(rd_kafka_t *rk);

/* librdkafka's notices and errors, at most one line every 30 s per process: a broker that is down is retried many
 * times a second, each attempt a line. What failed for good comes back through the calls' return values. Info
 * and debug lines (only there when a user sets log_level or debug) pass as they are. */
static long long last_log_ms = -30000;
static long left_out_logs = 0;

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    (void)rk;
    if (level >= 6) {
        fprintf(stderr, "librdkafka %s: %s\n", fac, buf);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    long long last = __atomic_load_n(&last_log_ms, __ATOMIC_RELAXED);
    if (now - last < 30000 ||
        !__atomic_compare_exchange_n(&last_log_ms, &last, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&left_out_logs, 1, __ATOMIC_RELAXED);
        return;
    }
    long left_out = __atomic_exchange_n(&left_out_logs, 0, __ATOMIC_RELAXED);
    if (left_out)
        fprintf(stderr, "librdkafka %s: %s (%ld more librdkafka line(s) in the last 30 s)\n", fac, buf, left_out);
    else
        fprintf(stderr, "librdkafka %s: %s\n", fac, buf);
}

static rd_kafka_t *new_client(int type, const char **keys, const char **values, int n, void *opaque,
                              void (*dr_msg_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *), char *error,
                              size_t error_size) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (int i = 0; i < n; i++) {
        if (rd_kafka_conf_set(conf, keys[i], values[i], error, error_size) != RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    }
    if (opaque != NULL) rd_kafka_conf_set_opaque(conf, opaque);
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    if (dr_msg_cb != NULL) rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
    rd_kafka_t *rk = rd_kafka_new(type, conf, error, error_size);
    if (rk == NULL) rd_kafka_conf_destroy(conf);
    return rk;
}

typedef struct {
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
    rd_kafka_message_t **messages; /* [head, head + count): held for dk_fill; [head + count, total): pending */
    size_t capacity;
    size_t head;
    size_t count;
    size_t total;
    char error[512];
} dk_reader;

const char *dk_error(dk_reader *r) { return r->error; }

/* A consumer of `topic`[`partition`] from offset `start`; NULL with `error` filled on failure. */
dk_reader *dk_open(const char **keys, const char **values, int n, const char *topic, int32_t partition, int64_t start,
                   char *error, size_t error_size) {
    rd_kafka_t *rk = new_client(RD_KAFKA_CONSUMER, keys, values, n, NULL, NULL, error, error_size);
    if (rk == NULL) return NULL;
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic, partition);
    rd_kafka_topic_partition_list_set_offset(list, topic, partition, start);
    int err = rd_kafka_assign(rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err != 0) {
        strncpy(error, rd_kafka_err2str(err), error_size - 1);
        error[error_size - 1] = 0;
        rd_kafka_destroy(rk);
        return NULL;
    }
    dk_reader *r = calloc(1, sizeof(dk_reader));
    r->rk = rk;
    r->queue = rd_kafka_queue_get_consumer(rk);
    return r;
}

static void drop_held(dk_reader *r) {
    for (size_t i = r->head; i < r->head + r->count; i++) rd_kafka_message_destroy(r->messages[i]);
    r->head += r->count;
    r->count = 0;
}

/* Hold the longest prefix of the pending records whose values and keys each fit Arrow's 2 GiB binary limit. */
static int64_t hold(dk_reader *r, int64_t *value_bytes, int64_t *key_bytes) {
    int64_t values = 0, keys = 0;
    size_t i = r->head;
    for (; i < r->total; i++) {
        rd_kafka_message_t *m = r->messages[i];
        if (i > r->head && (values + (int64_t)m->len > INT32_MAX || keys + (int64_t)m->key_len > INT32_MAX)) break;
        values += (int64_t)m->len;
        keys += (int64_t)m->key_len;
    }
    r->count = i - r->head;
    *value_bytes = values;
    *key_bytes = keys;
    return (int64_t)r->count;
}

static int64_t monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Slices of a fetch that has fewer records than it asked for: librdkafka's batch read returns only with `max`
 * messages or at its timeout, so a range whose last offsets hold no records (transaction markers, aborted records,
 * compaction) would wait out the whole timeout although the partition's end (an EOF event) is already there. */
#define DK_SLICE_MS 5

/*
 * Fetch up to `max` records with offsets below `end` (waiting at most `timeout_ms` in all). Returns as soon as it
 * has `max` records, the record at `end - 1`, a record at or past `end`, or the partition's end. Returns how many
 * are held for dk_fill (0 is possible) and sets *value_bytes, *key_bytes to their total sizes and *eof to 1 when
 * the partition end was reached; -1 on a fetch error (see dk_error).
 */
int64_t dk_consume(dk_reader *r, int64_t max, int timeout_ms, int64_t end, int64_t *value_bytes, int64_t *key_bytes,
                   int32_t *eof) {
    drop_held(r);
    *eof = 0;
    if (r->head < r->total) return hold(r, value_bytes, key_bytes); /* what the size limit left over last time */
    if ((size_t)max > r->capacity) {
        free(r->messages);
        r->messages = malloc(sizeof(rd_kafka_message_t *) * (size_t)max);
        r->capacity = (size_t)max;
    }
    r->head = r->total = 0;
    size_t kept = 0;
    int failed = 0, past_end = 0;
    int64_t deadline = monotonic_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - monotonic_ms();
        if (left < 0) left = 0;
        int wait = (int)(left < DK_SLICE_MS ? left : DK_SLICE_MS);
        ssize_t got = rd_kafka_consume_batch_queue(r->queue, wait, r->messages + kept, (size_t)max - kept);
        if (got < 0) {
            r->count = kept;
            drop_held(r);
            strncpy(r->error, "librdkafka refused the batch read", sizeof(r->error) - 1);
            return -1;
        }
        size_t scan = kept;
        for (ssize_t i = 0; i < got; i++) {
            rd_kafka_message_t *m = r->messages[scan + (size_t)i];
            if (m->err != 0) {
                if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                    *eof = 1;
                } else if (!failed) {
                    failed = 1;
                    if (m->payload != NULL && m->len > 0) {
                        size_t n = m->len < sizeof(r->error) - 1 ? m->len : sizeof(r->error) - 1;
                        memcpy(r->error, m->payload, n);
                        r->error[n] = 0;
                    } else {
                        strncpy(r->error, rd_kafka_err2str(m->err), sizeof(r->error) - 1);
                    }
                }
                rd_kafka_message_destroy(m);
            } else if (m->offset >= end) {
                past_end = 1;
                rd_kafka_message_destroy(m);
            } else {
                r->messages[kept++] = m;
            }
        }
        if (failed || *eof || past_end || kept >= (size_t)max || left == 0) break;
        if (kept > 0 && r->messages[kept - 1]->offset >= end - 1) break;
    }
    r->total = kept;
    if (failed) {
        r->count = kept;
        drop_held(r);
        return -1;
    }
    return hold(r, value_bytes, key_bytes);
}

/*
 * Copy the held records into caller-owned buffers sized from dk_consume, then release them. `nulls` gets bit 1
 * for a null value and bit 2 for a null key; offsets arrays have count + 1 entries.
 */
void dk_fill(dk_reader *r, int64_t *offsets, int64_t *timestamps, int32_t *value_offsets, uint8_t *value_data,
             int32_t *key_offsets, uint8_t *key_data, uint8_t *nulls) {
    int32_t vpos = 0, kpos = 0;
    rd_kafka_message_t **held = r->messages + r->head;
    for (size_t i = 0; i < r->count; i++) {
        rd_kafka_message_t *m = held[i];
        int tstype;
        offsets[i] = m->offset;
        timestamps[i] = rd_kafka_message_timestamp(m, &tstype);
        value_offsets[i] = vpos;
        key_offsets[i] = kpos;
        nulls[i] = (uint8_t)((m->payload == NULL ? 1 : 0) | (m->key == NULL ? 2 : 0));
        if (m->len) memcpy(value_data + vpos, m->payload, m->len);
        if (m->key_len) memcpy(key_data + kpos, m->key, m->key_len);
        vpos += (int32_t)m->len;
        kpos += (int32_t)m->key_len;
    }
    value_offsets[r->count] = vpos;
    key_offsets[r->count] = kpos;
    drop_held(r);
}

void dk_close(dk_reader *r) {
    r->count = r->total - r->head;
    drop_held(r);
    free(r->messages);
    rd_kafka_queue_destroy(r->queue);
    rd_kafka_consumer_close(r->rk);
    rd_kafka_destroy(r->rk);
    free(r);
}

/* -- producing ------------------------------------------------------------------------------------------------ */

typedef struct {
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    rd_kafka_message_t *messages;
    size_t capacity;
    int64_t failed; /* delivery reports with an error, since the last dk_producer_take_failed */
    char error[512]; /* the first of them, or why a produce call failed */
} dk_producer;

const char *dk_producer_error(dk_producer *p) { return p->error; }

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    dk_producer *p = opaque;
    if (m->err == 0) return;
    if (p->failed++ == 0) {
        strncpy(p->error, rd_kafka_err2str(m->err), sizeof(p->error) - 1);
        p->error[sizeof(p->error) - 1] = 0;
    }
}

/* A producer to `topic`; NULL with `error` filled on failure. */
dk_producer *dk_producer_open(const char **keys, const char **values, int n, const char *topic, char *error,
                              size_t error_size) {
    dk_producer *p = calloc(1, sizeof(dk_producer));
    p->rk = new_client(RD_KAFKA_PRODUCER, keys, values, n, p, on_delivery, error, error_size);
    if (p->rk == NULL) {
        free(p);
        return NULL;
    }
    p->rkt = rd_kafka_topic_new(p->rk, topic, NULL);
    return p;
}

/*
 * Enqueue `n` records: values[i] = value_data[value_offsets[i] .. value_offsets[i + 1]), keys likewise (no keys
 * when key_offsets is NULL; `nulls` bit 1: null value, bit 2: null key, may be NULL). `partition` -1 uses the
 * configured partitioner. A full local queue is waited out (serving delivery reports); returns 0, or -1 with
 * dk_producer_error set when librdkafka refuses a record for another reason (the records before it are queued).
 */
int dk_produce(dk_producer *p, int32_t partition, int64_t n, const int32_t *value_offsets, const uint8_t *value_data,
               const int32_t *key_offsets, const uint8_t *key_data, const uint8_t *nulls) {
    if ((size_t)n > p->capacity) {
        free(p->messages);
        p->messages = malloc(sizeof(rd_kafka_message_t) * (size_t)n);
        p->capacity = (size_t)n;
    }
    rd_kafka_message_t *ms = p->messages;
    for (int64_t i = 0; i < n; i++) {
        uint8_t null = nulls != NULL ? nulls[i] : 0;
        memset(&ms[i], 0, sizeof(rd_kafka_message_t));
        if (!(null & 1)) {
            ms[i].payload = (void *)(value_data + value_offsets[i]);
            ms[i].len = (size_t)(value_offsets[i + 1] - value_offsets[i]);
        }
        if (key_offsets != NULL && !(null & 2)) {
            ms[i].key = (void *)(key_data + key_offsets[i]);
            ms[i].key_len = (size_t)(key_offsets[i + 1] - key_offsets[i]);
        }
    }
    int64_t pending = n;
    while (pending > 0) {
        int chunk = pending > INT_MAX ? INT_MAX : (int)pending;
        int queued = rd_kafka_produce_batch(p->rkt, partition, RD_KAFKA_MSG_F_COPY, ms, chunk);
        if (queued == chunk) {
            ms += chunk;
            pending -= chunk;
            rd_kafka_poll(p->rk, 0);
            continue;
        }
        int64_t retry = 0;
        for (int i = 0; i < chunk; i++) {
            if (ms[i].err == 0) continue;
            if (ms[i].err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                strncpy(p->error, rd_kafka_err2str(ms[i].err), sizeof(p->error) - 1);
                p->error[sizeof(p->error) - 1] = 0;
                return -1;
            }
            ms[i].err = 0;
            ms[retry++] = ms[i]; /* the refused records keep their order at the front */
        }
        pending = retry + (pending - chunk);
        if (pending > retry) memmove(ms + retry, ms + chunk, sizeof(rd_kafka_message_t) * (size_t)(pending - retry));
        rd_kafka_poll(p->rk, 50); /* let deliveries drain the local queue */
    }
    return 0;
}

/* Wait up to `timeout_ms` for every queued record's delivery; returns how many are still undelivered. */
int dk_producer_flush(dk_producer *p, int timeout_ms) {
    rd_kafka_flush(p->rk, timeout_ms);
    return rd_kafka_outq_len(p->rk);
}

/* Failed deliveries reported so far (the first one's reason is dk_producer_error); resets the count. */
int64_t dk_producer_take_failed(dk_producer *p) {
    int64_t failed = p->failed;
    p->failed = 0;
    return failed;
}

/* Wait up to `timeout_ms` for outstanding deliveries, then free the producer. */
void dk_producer_close(dk_producer *p, int timeout_ms) {
    if (timeout_ms > 0) rd_kafka_flush(p->rk, timeout_ms);
    free(p->messages);
    rd_kafka_topic_destroy(p->rkt);
    rd_kafka_destroy(p->rk);
    free(p);
}
