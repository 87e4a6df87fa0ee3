import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberAssignment;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's own Java clients (kafka-clients 4.1) driven from Python tests.
 *
 * Usage: Harness MODE --bootstrap HOST:PORT [options]. Every line on stdout is one
 * JSON object with an "event" field; client logs go to stderr. Modes:
 *
 *   produce  --topic T --count N [--partitions P] [--prefix S]
 *            record i goes to partition i % P (or the default partitioner without
 *            --partitions); one "produced" event per record, then "done".
 *   consume  --topic T --group G [--protocol classic|consumer] [--instance-id I]
 *            [--assignor NAME] [--max-records N] [--commit] [--client-id C]
 *            subscribes and polls until stdin says "quit" (or closes), or until N
 *            records arrived (then commits synchronously if --commit). Stdin
 *            commands: "commit" (commitSync of the consumed position), "status",
 *            "quit". Events: started, assigned, revoked, lost, record, committed,
 *            status, error, closed.
 *   admin    OP ...  one administrative operation, one "result" (or "error") event:
 *            describe-groups G..., list-groups [consumer], list-offsets G,
 *            alter-offsets G T:P=OFFSET..., delete-offsets G T:P..., delete-groups G...,
 *            alter-configs topic|group|broker NAME KEY=VALUE|KEY=... (SET, or DELETE when empty),
 *            describe-configs topic|group|broker NAME, delete-records T:P=OFFSET...,
 *            describe-log-dirs, elect-leaders T:P...
 */
public final class Harness {

    // -- JSON output -----------------------------------------------------------------

    static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    @SuppressWarnings("unchecked")
    static String json(Object o) {
        if (o == null) {
            return "null";
        }
        if (o instanceof String) {
            return quote((String) o);
        }
        if (o instanceof Number || o instanceof Boolean) {
            return o.toString();
        }
        if (o instanceof Optional) {
            return json(((Optional<?>) o).orElse(null));
        }
        if (o instanceof Map) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<Object, Object> e : ((Map<Object, Object>) o).entrySet()) {
                if (b.length() > 1) {
                    b.append(',');
                }
                b.append(quote(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return b.append('}').toString();
        }
        if (o instanceof Collection) {
            StringBuilder b = new StringBuilder("[");
            for (Object x : (Collection<Object>) o) {
                if (b.length() > 1) {
                    b.append(',');
                }
                b.append(json(x));
            }
            return b.append(']').toString();
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

    /** Partitions as [[topic, partition], ...], sorted. */
    static List<List<Object>> tps(Collection<TopicPartition> partitions) {
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
        List<List<Object>> out = new ArrayList<>();
        for (TopicPartition tp : sorted) {
            out.add(List.of(tp.topic(), tp.partition()));
        }
        return out;
    }

    static List<List<Object>> offsets(Map<TopicPartition, OffsetAndMetadata> offsets) {
        List<List<Object>> out = new ArrayList<>();
        for (List<Object> tp : tps(offsets.keySet())) {
            OffsetAndMetadata om = offsets.get(new TopicPartition((String) tp.get(0), (Integer) tp.get(1)));
            out.add(List.of(tp.get(0), tp.get(1), om == null ? -1L : om.offset()));
        }
        return out;
    }

    static Map<String, Object> error(Throwable t) {
        Throwable cause = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("error", cause.getClass().getSimpleName());
        m.put("message", String.valueOf(cause.getMessage()));
        return m;
    }

    // -- arguments -------------------------------------------------------------------

    static final class Args {
        final List<String> positional = new ArrayList<>();
        final Map<String, String> options = new HashMap<>();

        Args(String[] argv, int from) {
            for (int i = from; i < argv.length; i++) {
                String a = argv[i];
                if (a.startsWith("--")) {
                    String key = a.substring(2);
                    if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                        options.put(key, argv[++i]);
                    } else {
                        options.put(key, "true");
                    }
                } else {
                    positional.add(a);
                }
            }
        }

        String get(String key) {
            String v = options.get(key);
            if (v == null) {
                throw new IllegalArgumentException("missing --" + key);
            }
            return v;
        }

        String get(String key, String dflt) {
            return options.getOrDefault(key, dflt);
        }
    }

    static TopicPartition parseTp(String s) {
        int colon = s.lastIndexOf(':');
        return new TopicPartition(s.substring(0, colon), Integer.parseInt(s.substring(colon + 1)));
    }

    // -- produce ---------------------------------------------------------------------

    static void produce(Args a) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        String topic = a.get("topic");
        int count = Integer.parseInt(a.get("count"));
        String partitions = a.get("partitions", null);
        String prefix = a.get("prefix", "v");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                Integer partition = partitions == null ? null : i % Integer.parseInt(partitions);
                sent.add(producer.send(new ProducerRecord<>(topic, partition, "k" + i, prefix + "-" + i)));
            }
            producer.flush();
            for (java.util.concurrent.Future<RecordMetadata> f : sent) {
                RecordMetadata md = f.get(60, TimeUnit.SECONDS);
                emit("produced", "topic", md.topic(), "partition", md.partition(), "offset", md.offset());
            }
        }
        emit("done", "count", count);
    }

    // -- consume ---------------------------------------------------------------------

    static void consume(Args a) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.get("group"));
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, a.get("protocol", "classic"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, a.get("client-id", "harness-" + ProcessHandle.current().pid()));
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, a.get("isolation-level", "read_uncommitted"));
        if (a.options.containsKey("instance-id")) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, a.get("instance-id"));
        }
        if (a.options.containsKey("assignor")) {
            p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, a.get("assignor"));
        }
        if ("classic".equals(a.get("protocol", "classic"))) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, a.get("session-timeout-ms", "10000"));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, a.get("heartbeat-interval-ms", "1000"));
        }
        String topic = a.get("topic");
        long maxRecords = Long.parseLong(a.get("max-records", "-1"));
        boolean commitAtEnd = a.options.containsKey("commit");

        LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    commands.add(line.trim());
                }
            } catch (Exception ignored) {
                // stdin gone: treated as quit below
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
            emit("started", "protocol", a.get("protocol", "classic"));
            long consumed = 0;
            boolean running = true;
            while (running) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    consumed++;
                    emit("record", "topic", r.topic(), "partition", r.partition(), "offset", r.offset(),
                         "key", r.key(), "value", r.value());
                }
                if (maxRecords >= 0 && consumed >= maxRecords) {
                    if (commitAtEnd) {
                        commit(consumer);
                    }
                    break;
                }
                String cmd;
                while (running && (cmd = commands.poll()) != null) {
                    switch (cmd) {
                        case "commit":
                            commit(consumer);
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
            emit("error", "error", error(e).get("error"), "message", error(e).get("message"));
        }
        emit("closed");
    }

    static void commit(KafkaConsumer<String, String> consumer) {
        Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
        for (TopicPartition tp : consumer.assignment()) {
            positions.put(tp, new OffsetAndMetadata(consumer.position(tp)));
        }
        try {
            consumer.commitSync(positions, Duration.ofSeconds(30));
            emit("committed", "offsets", offsets(positions));
        } catch (Exception e) {
            Map<String, Object> err = error(e);
            emit("commit_failed", "error", err.get("error"), "message", err.get("message"));
        }
    }

    // -- admin -----------------------------------------------------------------------

    static Map<String, Object> assignment(MemberAssignment a) {
        Map<String, Object> m = new TreeMap<>();
        if (a != null) {
            m.put("partitions", tps(a.topicPartitions()));
        }
        return m;
    }

    static void admin(Args a) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        List<String> args = a.positional;
        String op = args.get(0);
        List<String> rest = args.subList(1, args.size());
        try (Admin admin = Admin.create(p)) {
            switch (op) {
                case "describe-groups": {
                    Map<String, Object> groups = new LinkedHashMap<>();
                    admin.describeConsumerGroups(rest).describedGroups().forEach((id, fut) -> {
                        try {
                            ConsumerGroupDescription d = fut.get();
                            Map<String, Object> g = new LinkedHashMap<>();
                            g.put("group_id", d.groupId());
                            g.put("type", String.valueOf(d.type()));
                            g.put("state", String.valueOf(d.groupState()));
                            g.put("assignor", d.partitionAssignor());
                            g.put("simple", d.isSimpleConsumerGroup());
                            g.put("group_epoch", d.groupEpoch());
                            g.put("target_assignment_epoch", d.targetAssignmentEpoch());
                            g.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
                            List<Object> members = new ArrayList<>();
                            for (MemberDescription m : d.members()) {
                                Map<String, Object> mm = new LinkedHashMap<>();
                                mm.put("member_id", m.consumerId());
                                mm.put("instance_id", m.groupInstanceId());
                                mm.put("client_id", m.clientId());
                                mm.put("host", m.host());
                                mm.put("assignment", tps(m.assignment().topicPartitions()));
                                mm.put("target_assignment", m.targetAssignment().map(t -> (Object) tps(t.topicPartitions())).orElse(null));
                                mm.put("member_epoch", m.memberEpoch());
                                mm.put("upgraded", m.upgraded());
                                members.add(mm);
                            }
                            g.put("members", members);
                            groups.put(id, g);
                        } catch (Exception e) {
                            groups.put(id, error(e));
                        }
                    });
                    emit("result", "op", op, "groups", groups);
                    break;
                }
                case "describe-share-groups": {
                    Map<String, Object> groups = new LinkedHashMap<>();
                    admin.describeShareGroups(rest).describedGroups().forEach((id, fut) -> {
                        try {
                            ShareGroupDescription d = fut.get();
                            Map<String, Object> g = new LinkedHashMap<>();
                            g.put("group_id", d.groupId());
                            g.put("state", String.valueOf(d.groupState()));
                            g.put("group_epoch", d.groupEpoch());
                            g.put("target_assignment_epoch", d.targetAssignmentEpoch());
                            g.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
                            List<Object> members = new ArrayList<>();
                            for (ShareMemberDescription m : d.members()) {
                                Map<String, Object> mm = new LinkedHashMap<>();
                                mm.put("member_id", m.consumerId());
                                mm.put("client_id", m.clientId());
                                mm.put("host", m.host());
                                mm.put("assignment", tps(m.assignment().topicPartitions()));
                                mm.put("member_epoch", m.memberEpoch());
                                members.add(mm);
                            }
                            g.put("members", members);
                            groups.put(id, g);
                        } catch (Exception e) {
                            groups.put(id, error(e));
                        }
                    });
                    emit("result", "op", op, "groups", groups);
                    break;
                }
                case "list-groups": {
                    ListGroupsOptions opts = rest.contains("consumer") ? ListGroupsOptions.forConsumerGroups()
                        : rest.contains("share") ? ListGroupsOptions.forShareGroups() : new ListGroupsOptions();
                    List<Object> out = new ArrayList<>();
                    for (GroupListing g : admin.listGroups(opts).all().get()) {
                        Map<String, Object> m = new LinkedHashMap<>();
                        m.put("group_id", g.groupId());
                        m.put("type", g.type().map(String::valueOf));
                        m.put("protocol", g.protocol());
                        m.put("state", g.groupState().map(String::valueOf));
                        out.add(m);
                    }
                    emit("result", "op", op, "groups", out);
                    break;
                }
                case "list-offsets": {
                    Map<TopicPartition, OffsetAndMetadata> got = admin.listConsumerGroupOffsets(rest.get(0)).partitionsToOffsetAndMetadata().get();
                    emit("result", "op", op, "offsets", offsets(got));
                    break;
                }
                case "alter-offsets": {
                    Map<TopicPartition, OffsetAndMetadata> want = new HashMap<>();
                    for (String s : rest.subList(1, rest.size())) {
                        String[] kv = s.split("=");
                        want.put(parseTp(kv[0]), new OffsetAndMetadata(Long.parseLong(kv[1])));
                    }
                    admin.alterConsumerGroupOffsets(rest.get(0), want).all().get();
                    emit("result", "op", op, "offsets", offsets(want));
                    break;
                }
                case "delete-offsets": {
                    Set<TopicPartition> parts = new HashSet<>();
                    for (String s : rest.subList(1, rest.size())) {
                        parts.add(parseTp(s));
                    }
                    admin.deleteConsumerGroupOffsets(rest.get(0), parts).all().get();
                    emit("result", "op", op, "partitions", tps(parts));
                    break;
                }
                case "delete-groups": {
                    Map<String, Object> results = new LinkedHashMap<>();
                    admin.deleteConsumerGroups(rest).deletedGroups().forEach((id, fut) -> {
                        try {
                            fut.get();
                            results.put(id, "ok");
                        } catch (Exception e) {
                            results.put(id, error(e));
                        }
                    });
                    emit("result", "op", op, "groups", results);
                    break;
                }
                case "alter-configs": {
                    ConfigResource res = new ConfigResource(ConfigResource.Type.valueOf(rest.get(0).toUpperCase()), rest.get(1));
                    List<AlterConfigOp> ops = new ArrayList<>();
                    for (String s : rest.subList(2, rest.size())) {
                        String[] kv = s.split("=", 2);
                        ops.add(kv[1].isEmpty()
                            ? new AlterConfigOp(new ConfigEntry(kv[0], null), AlterConfigOp.OpType.DELETE)
                            : new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET));
                    }
                    Map<ConfigResource, Collection<AlterConfigOp>> want = new HashMap<>();
                    want.put(res, ops);
                    admin.incrementalAlterConfigs(want).all().get();
                    emit("result", "op", op);
                    break;
                }
                case "describe-configs": {
                    ConfigResource res = new ConfigResource(ConfigResource.Type.valueOf(rest.get(0).toUpperCase()), rest.get(1));
                    Config config = admin.describeConfigs(List.of(res)).all().get().get(res);
                    Map<String, Object> entries = new TreeMap<>();
                    for (ConfigEntry e : config.entries()) {
                        Map<String, Object> m = new LinkedHashMap<>();
                        m.put("value", e.value());
                        m.put("source", String.valueOf(e.source()));
                        m.put("sensitive", e.isSensitive());
                        m.put("read_only", e.isReadOnly());
                        entries.put(e.name(), m);
                    }
                    emit("result", "op", op, "configs", entries);
                    break;
                }
                case "delete-records": {
                    Map<TopicPartition, RecordsToDelete> want = new HashMap<>();
                    for (String s : rest) {
                        String[] kv = s.split("=");
                        want.put(parseTp(kv[0]), RecordsToDelete.beforeOffset(Long.parseLong(kv[1])));
                    }
                    Map<String, Object> results = new TreeMap<>();
                    admin.deleteRecords(want).lowWatermarks().forEach((tp, fut) -> {
                        try {
                            results.put(tp.toString(), fut.get().lowWatermark());
                        } catch (Exception e) {
                            results.put(tp.toString(), error(e));
                        }
                    });
                    emit("result", "op", op, "partitions", results);
                    break;
                }
                case "describe-log-dirs": {
                    Map<String, Object> dirs = new TreeMap<>();
                    admin.describeLogDirs(List.of(Integer.parseInt(rest.isEmpty() ? "1" : rest.get(0)))).allDescriptions().get().forEach((broker, byDir) ->
                        byDir.forEach((dir, d) -> {
                            Map<String, Object> m = new LinkedHashMap<>();
                            m.put("error", d.error() == null ? null : d.error().getClass().getSimpleName());
                            Map<String, Object> sizes = new TreeMap<>();
                            d.replicaInfos().forEach((tp, info) -> sizes.put(tp.toString(), info.size()));
                            m.put("sizes", sizes);
                            m.put("total_bytes", d.totalBytes().orElse(-1L));
                            m.put("usable_bytes", d.usableBytes().orElse(-1L));
                            dirs.put(dir, m);
                        }));
                    emit("result", "op", op, "dirs", dirs);
                    break;
                }
                case "elect-leaders": {
                    Set<TopicPartition> parts = new HashSet<>();
                    for (String s : rest) {
                        parts.add(parseTp(s));
                    }
                    Map<String, Object> results = new TreeMap<>();
                    admin.electLeaders(ElectionType.PREFERRED, parts).partitions().get().forEach((tp, err) ->
                        results.put(tp.toString(), err.map(e -> (Object) e.getClass().getSimpleName()).orElse("ok")));
                    emit("result", "op", op, "partitions", results);
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown admin op " + op);
            }
        } catch (ExecutionException e) {
            Map<String, Object> err = error(e);
            emit("error", "op", op, "error", err.get("error"), "message", err.get("message"));
        }
    }

    // -- consume, transform, produce in transactions ------------------------------------

    /**
     * Reads ``--input`` with a read_committed consumer of ``--group`` (the ``--protocol``),
     * writes each value upper-cased to ``--output`` in a transaction with the consumer's
     * offsets (sendOffsetsToTransaction with its group metadata), aborting every
     * ``--abort-every``-th transaction (then seeking back to the committed offsets, so those
     * records are processed again), until ``--count`` input records were committed; at most
     * ``--max-poll-records`` records a transaction.
     */
    static void transform(Args a) throws Exception {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        c.put(ConsumerConfig.GROUP_ID_CONFIG, a.get("group"));
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, a.get("protocol", "classic"));
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, a.get("max-poll-records", "500"));
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.get("transactional-id"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        String input = a.get("input");
        String output = a.get("output");
        long count = Long.parseLong(a.get("count"));
        int abortEvery = Integer.parseInt(a.get("abort-every", "0"));
        long done = 0;
        int txns = 0;
        int aborted = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c); KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            long deadline = System.currentTimeMillis() + 120_000;
            while (done < count && System.currentTimeMillis() < deadline) {
                var records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(), r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                txns++;
                if (abortEvery > 0 && txns % abortEvery == 0) {
                    producer.flush();
                    producer.abortTransaction();
                    aborted++;
                    Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
                    for (TopicPartition tp : consumer.assignment()) {
                        OffsetAndMetadata at = committed.get(tp);
                        if (at == null) {
                            consumer.seekToBeginning(List.of(tp));
                        } else {
                            consumer.seek(tp, at.offset());
                        }
                    }
                    emit("aborted", "records", records.count());
                } else {
                    producer.commitTransaction();
                    done += records.count();
                    emit("committed", "records", records.count(), "total", done);
                }
            }
        }
        emit("done", "committed", done, "transactions", txns, "aborted", aborted);
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            System.err.println("usage: Harness produce|consume|admin --bootstrap HOST:PORT ...");
            System.exit(2);
        }
        Args a = new Args(argv, 1);
        switch (argv[0]) {
            case "produce": produce(a); break;
            case "consume": consume(a); break;
            case "admin": admin(a); break;
            case "transform": transform(a); break;
            default:
                System.err.println("unknown mode " + argv[0]);
                System.exit(2);
        }
        System.exit(0);
    }
}
