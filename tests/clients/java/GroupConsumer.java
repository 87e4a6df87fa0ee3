import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A Java KafkaConsumer in a group, with any consumer setting, for kafkalite's
 * client-matrix tests (tests/clients/test_java.py). It complements
 * tests/java/clients/Harness.java with what that one does not set: the classic
 * protocol's partition.assignment.strategy (eager range vs cooperative-sticky)
 * and, generally, any property.
 *
 * Usage: GroupConsumer --bootstrap H:P --topic T --group G [--set key=value]...
 *        [--max-records N] [--commit] [--client-id C]
 *
 * Polls until stdin says "quit" (or closes), or until N records arrived (then
 * commits synchronously if --commit). Stdin commands: "commit", "status", "quit".
 * Every stdout line is one JSON object with an "event" field: started, assigned,
 * revoked, lost, record, committed, commit_failed, status, error, closing, closed.
 * Client logs go to stderr.
 */
public final class GroupConsumer {

    static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    @SuppressWarnings("unchecked")
    static String json(Object o) {
        if (o == null) {
            return "null";
        }
        if (o instanceof Number || o instanceof Boolean) {
            return o.toString();
        }
        if (o instanceof Map) {
            List<String> parts = new ArrayList<>();
            for (Map.Entry<Object, Object> e : ((Map<Object, Object>) o).entrySet()) {
                parts.add(quote(String.valueOf(e.getKey())) + ":" + json(e.getValue()));
            }
            return "{" + String.join(",", parts) + "}";
        }
        if (o instanceof Collection) {
            List<String> parts = new ArrayList<>();
            for (Object x : (Collection<Object>) o) {
                parts.add(json(x));
            }
            return "[" + String.join(",", parts) + "]";
        }
        return quote(o.toString());
    }

    static synchronized void emit(String event, Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        System.out.println(json(m));
        System.out.flush();
    }

    static List<List<Object>> tps(Collection<TopicPartition> partitions) {
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
        List<List<Object>> out = new ArrayList<>();
        for (TopicPartition tp : sorted) {
            out.add(List.of(tp.topic(), tp.partition()));
        }
        return out;
    }

    /** Commits the given next offsets, or every assigned partition's position if null. */
    static void commit(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> next) {
        Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
        if (next == null) {
            for (TopicPartition tp : consumer.assignment()) {
                positions.put(tp, new OffsetAndMetadata(consumer.position(tp)));
            }
        } else {
            next.forEach((tp, offset) -> positions.put(tp, new OffsetAndMetadata(offset)));
        }
        try {
            consumer.commitSync(positions, Duration.ofSeconds(30));
            List<List<Object>> out = new ArrayList<>();
            for (List<Object> tp : tps(positions.keySet())) {
                out.add(List.of(tp.get(0), tp.get(1), positions.get(new TopicPartition((String) tp.get(0), (Integer) tp.get(1))).offset()));
            }
            emit("committed", "offsets", out);
        } catch (Exception e) {
            emit("commit_failed", "error", e.getClass().getSimpleName(), "message", String.valueOf(e.getMessage()));
        }
    }

    public static void main(String[] argv) {
        Map<String, String> opts = new HashMap<>();
        Properties p = new Properties();
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        for (int i = 0; i < argv.length; i++) {
            String key = argv[i].substring(2);
            boolean flag = i + 1 >= argv.length || argv[i + 1].startsWith("--");
            String value = flag ? "true" : argv[++i];
            if (key.equals("set")) {
                int eq = value.indexOf('=');
                p.put(value.substring(0, eq), value.substring(eq + 1));
            } else {
                opts.put(key, value);
            }
        }
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, opts.get("group"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, opts.getOrDefault("client-id", "group-consumer-" + ProcessHandle.current().pid()));
        if (!"consumer".equals(p.getProperty(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic"))) {
            p.putIfAbsent(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            p.putIfAbsent(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        }
        String topic = opts.get("topic");
        long maxRecords = Long.parseLong(opts.getOrDefault("max-records", "-1"));
        boolean commitAtEnd = opts.containsKey("commit");

        LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    commands.add(line.trim());
                }
            } catch (Exception ignored) {
                // stdin gone: treated as quit
            }
            commands.add("quit");
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();

        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    emit("revoked", "partitions", tps(partitions), "assignment", tps(consumer.assignment()));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    ConsumerGroupMetadata md = consumer.groupMetadata();
                    emit("assigned", "partitions", tps(partitions), "assignment", tps(consumer.assignment()),
                         "member_id", md.memberId(), "generation", md.generationId());
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    emit("lost", "partitions", tps(partitions));
                }
            });
            emit("started", "config", new java.util.TreeMap<>(p));
            long consumed = 0;
            Map<TopicPartition, Long> next = new HashMap<>();
            boolean running = true;
            while (running) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    if (maxRecords >= 0 && consumed >= maxRecords) {
                        break; // the rest of the batch is left for the next member; only what was seen is committed
                    }
                    consumed++;
                    next.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                    emit("record", "topic", r.topic(), "partition", r.partition(), "offset", r.offset(), "key", r.key(), "value", r.value());
                }
                if (maxRecords >= 0 && consumed >= maxRecords) {
                    if (commitAtEnd) {
                        commit(consumer, next);
                    }
                    break;
                }
                String cmd;
                while (running && (cmd = commands.poll()) != null) {
                    switch (cmd) {
                        case "commit":
                            commit(consumer, null);
                            break;
                        case "status": {
                            ConsumerGroupMetadata md = consumer.groupMetadata();
                            emit("status", "assignment", tps(consumer.assignment()), "member_id", md.memberId(),
                                 "generation", md.generationId(), "consumed", consumed);
                            break;
                        }
                        case "quit":
                            running = false;
                            break;
                        default:
                            emit("error", "error", "UnknownCommand", "message", cmd);
                    }
                }
            }
            emit("closing");
        } catch (Exception e) {
            emit("error", "error", e.getClass().getSimpleName(), "message", String.valueOf(e.getMessage()));
        }
        emit("closed");
        System.exit(0);
    }
}
