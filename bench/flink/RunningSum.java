// The anchor job of bench/failover_vs_flink.py: a keyed running sum with Flink's own
// ValueState, checkpointing every second. It is compiled with javac at bench time against
// the Flink distribution the bench installs (the apache-flink-libraries wheel).
package sparkpointbench;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

public final class RunningSum {
    public static void main(String[] args) throws Exception {
        long recordsPerSecond = args.length > 0 ? Long.parseLong(args[0]) : 20_000L;
        long checkpointMillis = args.length > 1 ? Long.parseLong(args[1]) : 1_000L;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.enableCheckpointing(checkpointMillis);
        DataGeneratorSource<Long> source = new DataGeneratorSource<>(
                index -> index,
                Long.MAX_VALUE,
                RateLimiterStrategy.perSecond(recordsPerSecond),
                Types.LONG);
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "numbers")
                .keyBy(value -> value % 1000)
                .process(new Sum())
                .sinkTo(new DiscardingSink<>());
        env.execute("sparkpoint-bench-running-sum");
    }

    /** Per key: the running sum of every value seen, in keyed ValueState. */
    static final class Sum extends KeyedProcessFunction<Long, Long, Long> {
        private transient ValueState<Long> total;

        @Override
        public void open(OpenContext context) {
            total = getRuntimeContext().getState(new ValueStateDescriptor<>("total", Types.LONG));
        }

        @Override
        public void processElement(Long value, Context context, Collector<Long> out)
                throws Exception {
            Long current = total.value();
            long next = (current == null ? 0L : current) + value;
            total.update(next);
            out.collect(next);
        }
    }
}
