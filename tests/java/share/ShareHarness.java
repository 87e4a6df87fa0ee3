import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;

/**
 * A KafkaShareConsumer (kafka-clients 4.4.0) for tests/integration/test_share_java.py.
 *
 * ShareHarness share --bootstrap HOST:PORT --group G --topic T --ack POLICY
 *
 * Prints one JSON object per line: {"event":"record","offset":N,"value":"...","delivery":N,"ack":"ACCEPT"}
 * for each record received, {"event":"holding"} when it stops polling (POLICY hold), {"event":"closed"}.
 * POLICY: accept (every record), release:VALUE (RELEASE that value every time it comes, ACCEPT the rest),
 * reject:VALUE, release-first (RELEASE a record on its first delivery, ACCEPT it later), hold (take the
 * first records and never acknowledge nor poll again: their acquisition locks run out).
 * "quit" on stdin closes the consumer.
 */
public class ShareHarness {
    static String q(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] argv) throws Exception {
        String bootstrap = null, group = null, topic = null, ack = "accept", maxPollRecords = "500";
        // JavaClient puts a mode first ("share"), then --bootstrap HOST:PORT
        for (int i = argv.length > 0 && !argv[0].startsWith("--") ? 1 : 0; i + 1 < argv.length; i += 2) {
            switch (argv[i]) {
                case "--bootstrap": bootstrap = argv[i + 1]; break;
                case "--group": group = argv[i + 1]; break;
                case "--topic": topic = argv[i + 1]; break;
                case "--ack": ack = argv[i + 1]; break;
                case "--max-poll-records": maxPollRecords = argv[i + 1]; break;
                default: throw new IllegalArgumentException(argv[i]);
            }
        }
        AtomicBoolean quit = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if (line.trim().equals("quit")) break;
                }
            } catch (Exception e) {
                // stdin closed
            }
            quit.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", "share-" + ack);
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("share.acknowledgement.mode", "explicit");
        p.put("max.poll.records", maxPollRecords);
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            System.out.println("{\"event\":\"subscribed\"}");
            boolean holding = false;
            while (!quit.get()) {
                if (holding) {
                    Thread.sleep(50);
                    continue;
                }
                ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : records) {
                    int delivery = r.deliveryCount().map(Short::intValue).orElse(-1);
                    AcknowledgeType type = AcknowledgeType.ACCEPT;
                    if (ack.equals("hold")) {
                        type = null;
                    } else if (ack.equals("release-first") && delivery == 1) {
                        type = AcknowledgeType.RELEASE;
                    } else if (ack.startsWith("release:") && ack.substring(8).equals(r.value())) {
                        type = AcknowledgeType.RELEASE;
                    } else if (ack.startsWith("reject:") && ack.substring(7).equals(r.value())) {
                        type = AcknowledgeType.REJECT;
                    }
                    if (type != null) {
                        c.acknowledge(r, type);
                    }
                    System.out.println("{\"event\":\"record\",\"offset\":" + r.offset() + ",\"value\":" + q(r.value())
                        + ",\"delivery\":" + delivery + ",\"ack\":" + q(type == null ? null : type.name()) + "}");
                }
                if (!records.isEmpty()) {
                    if (ack.equals("hold")) {
                        holding = true;
                        System.out.println("{\"event\":\"holding\"}");
                    } else {
                        c.commitSync();
                        System.out.println("{\"event\":\"committed\",\"count\":" + records.count() + "}");
                    }
                }
            }
        }
        System.out.println("{\"event\":\"closed\"}");
    }
}
