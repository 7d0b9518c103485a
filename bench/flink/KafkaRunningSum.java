// The Flink anchor of bench/kafka_bench.py: Kafka → a keyed running count → Kafka, with
// Flink's KafkaSource (read_committed) and its KafkaSink in EXACTLY_ONCE mode (Kafka
// transactions committed when a checkpoint completes). Records and outputs are the ones of
// sparkpoint's orders example: {"id": …, "key": …, "amount": …} in, ["id","key",seq,amount]
// out. Compiled with javac at bench time against Flink's jars and the flink-kafka set.
package sparkpointbench;

import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

public final class KafkaRunningSum {
    private static final Pattern KEY = Pattern.compile("\"key\": \"([^\"]*)\"");

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String input = args[1];
        String output = args[2];
        long checkpointMillis = Long.parseLong(args[3]);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.enableCheckpointing(checkpointMillis);
        KafkaSource<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(input)
                .setGroupId("flink-" + input)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setValueOnlyDeserializer(new SimpleStringSchema())
                .setProperty("isolation.level", "read_committed")
                .build();
        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic(output)
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix("flink-" + output)
                .setProperty("transaction.timeout.ms", "600000")
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "orders")
                .keyBy(KafkaRunningSum::keyOf)
                .process(new CountPerKey())
                .sinkTo(sink);
        env.execute("sparkpoint-bench-kafka-running-sum");
    }

    static String keyOf(String record) {
        Matcher m = KEY.matcher(record);
        return m.find() ? m.group(1) : "";
    }

    /** Per key: how many records it has seen; one output per record. */
    static final class CountPerKey extends KeyedProcessFunction<String, String, String> {
        private static final Pattern ID = Pattern.compile("\"id\": \"([^\"]*)\"");
        private static final Pattern AMOUNT = Pattern.compile("\"amount\": (-?[0-9]+)");
        private transient ValueState<Long> count;

        @Override
        public void open(OpenContext context) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(String record, Context context, Collector<String> out)
                throws Exception {
            Long current = count.value();
            long seq = (current == null ? 0L : current) + 1;
            count.update(seq);
            Matcher id = ID.matcher(record);
            Matcher amount = AMOUNT.matcher(record);
            if (!id.find() || !amount.find()) {
                return;
            }
            out.collect("[\"" + id.group(1) + "\",\"" + context.getCurrentKey() + "\"," + seq
                    + "," + amount.group(1) + "]");
        }
    }
}
