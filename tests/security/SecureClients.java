import java.io.FileInputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java client over secured listeners, for tests/security (kafkalite and Apache Kafka alike).
 *
 *   SecureClients roundtrip TOPIC COUNT PROPS...   for each properties file (bootstrap.servers, security.protocol,
 *       sasl.*, ssl.* in it): produce COUNT records to TOPIC, read them back from partition 0 (assigned, no group);
 *       one JSON line per file: {"props": i, "produced": n, "consumed": m} or {"props": i, "error": "..."}.
 *   SecureClients slow TOPIC COUNT INTERVAL_MS PROPS   one producer sends COUNT records INTERVAL_MS apart, each
 *       acknowledged before the next (a connection that lives long enough to re-authenticate, KIP-368); then
 *       {"produced": n} or {"error": "..."}.
 */
public final class SecureClients {

    static String quote(String s) {
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

    static Properties load(String path) throws Exception {
        Properties p = new Properties();
        try (FileInputStream in = new FileInputStream(path)) {
            p.load(in);
        }
        return p;
    }

    static String describe(Throwable t) {
        Throwable root = t;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        return root.getClass().getSimpleName() + ": " + root.getMessage();
    }

    static KafkaProducer<String, String> producer(Properties base) {
        Properties p = new Properties();
        p.putAll(base);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        return new KafkaProducer<>(p);
    }

    static void roundtrip(String topic, int count, String[] files) {
        for (int i = 0; i < files.length; i++) {
            String tag = "p" + i + "-" + System.nanoTime();
            try {
                Properties base = load(files[i]);
                long first = -1;
                try (KafkaProducer<String, String> producer = producer(base)) {
                    List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> sent = new ArrayList<>();
                    for (int n = 0; n < count; n++) {
                        sent.add(producer.send(new ProducerRecord<>(topic, 0, "k" + n, tag + "-" + n)));
                    }
                    producer.flush();
                    for (java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata> f : sent) {
                        long offset = f.get(30, TimeUnit.SECONDS).offset();
                        if (first < 0) {
                            first = offset;
                        }
                    }
                }
                Properties c = new Properties();
                c.putAll(base);
                c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                int consumed = 0;
                try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
                    TopicPartition tp = new TopicPartition(topic, 0);
                    consumer.assign(List.of(tp));
                    consumer.seek(tp, first);
                    long deadline = System.currentTimeMillis() + 30000;
                    while (consumed < count && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                            if (r.value().startsWith(tag + "-")) {
                                consumed++;
                            }
                        }
                    }
                }
                System.out.println("{\"props\":" + i + ",\"produced\":" + count + ",\"consumed\":" + consumed + "}");
            } catch (Throwable t) {
                System.out.println("{\"props\":" + i + ",\"error\":" + quote(describe(t)) + "}");
            }
            System.out.flush();
        }
    }

    static void slow(String topic, int count, long intervalMs, String file) {
        int produced = 0;
        try (KafkaProducer<String, String> producer = producer(load(file))) {
            for (int n = 0; n < count; n++) {
                producer.send(new ProducerRecord<>(topic, 0, "k" + n, "slow-" + n)).get(30, TimeUnit.SECONDS);
                produced++;
                Thread.sleep(intervalMs);
            }
            System.out.println("{\"produced\":" + produced + "}");
        } catch (Throwable t) {
            System.out.println("{\"produced\":" + produced + ",\"error\":" + quote(describe(t)) + "}");
        }
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        if ("roundtrip".equals(mode)) {
            String[] files = new String[args.length - 3];
            System.arraycopy(args, 3, files, 0, files.length);
            roundtrip(args[1], Integer.parseInt(args[2]), files);
        } else if ("slow".equals(mode)) {
            slow(args[1], Integer.parseInt(args[2]), Long.parseLong(args[3]), args[4]);
        } else {
            throw new IllegalArgumentException("unknown mode " + mode);
        }
    }
}
