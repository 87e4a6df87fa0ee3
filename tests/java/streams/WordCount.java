import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A Kafka Streams (4.1) word count under processing.guarantee=exactly_once_v2,
 * driven from tests/integration/test_streams_eos.py.
 *
 * Usage: WordCount run --bootstrap HOST:PORT --input T --output T --app-id A
 *        --state-dir D [--threads N] [--commit-ms MS] [--progress-every N]
 *
 * Input values are "WORD:ID"; the word is re-keyed (a repartition topic), counted
 * in a persistent (RocksDB) store backed by a changelog topic, and every update
 * is written to the output topic as key WORD, value "WORD:COUNT" (the store's
 * cache is off, so each input record yields exactly one output record).
 *
 * Every stdout line is one JSON object with an "event" field; logs go to stderr.
 * Events: state (each KafkaStreams state change), progress (every N records
 * seen by the source, aborted attempts included), restored (a store partition
 * restored from its changelog), uncaught (a stream thread died; it is
 * replaced), closed. A "quit" line on stdin, or its end, closes the app.
 */
public final class WordCount {

    private static final ObjectMapper JSON = new ObjectMapper();

    static synchronized void emit(String event, Object... fields) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            m.put((String) fields[i], fields[i + 1]);
        }
        try {
            System.out.println(JSON.writeValueAsString(m));
        } catch (Exception e) {
            System.out.println("{\"event\":\"unprintable\"}");
        }
        System.out.flush();
    }

    static String word(String value) {
        int colon = value.indexOf(':');
        return colon < 0 ? value : value.substring(0, colon);
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new LinkedHashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            opt.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        String input = opt.get("input");
        String output = opt.get("output");
        long every = Long.parseLong(opt.getOrDefault("progress-every", "1000"));

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, opt.get("app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("bootstrap"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Integer.parseInt(opt.getOrDefault("commit-ms", "100")));
        p.put(StreamsConfig.STATE_DIR_CONFIG, opt.get("state-dir"));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(opt.getOrDefault("threads", "1")));
        // the classic rebalance protocol: kafkalite has no KIP-1071 "streams" groups
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "classic");
        // a killed instance leaves the group within seconds, not Streams' 45 s
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);

        AtomicLong seen = new AtomicLong();
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .peek((k, v) -> {
                long n = seen.incrementAndGet();
                if (n % every == 0) {
                    emit("progress", "processed", n);
                }
            })
            .groupBy((k, v) -> word(v), Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()).withCachingDisabled())
            .toStream()
            .mapValues((w, count) -> w + ":" + count)
            .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> emit("state", "state", now.name(), "previous", before.name()));
        streams.setUncaughtExceptionHandler(e -> {
            emit("uncaught", "error", String.valueOf(e));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long count) {
            }

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                emit("restored", "store", store, "partition", tp.partition(), "records", total);
            }
        });
        streams.start();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("quit")) {
            // nothing else to do: the app runs until told to stop
        }
        boolean closed = streams.close(Duration.ofSeconds(60));
        emit("closed", "clean", closed);
        System.exit(0);
    }
}
