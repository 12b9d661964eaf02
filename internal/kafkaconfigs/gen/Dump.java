// Dump prints every broker config name an Apache Kafka release's jars
// define, one "name<TAB>type<TAB>update mode" line each (the mode is
// empty before 4.x's DynamicBrokerConfig.dynamicConfigUpdateModes).
// Run by gen/main.go with the release's libs/ on the classpath.
import java.lang.reflect.Method;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.config.ConfigDef;

public class Dump {
  public static void main(String[] args) throws Exception {
    Class<?> kc = Class.forName("kafka.server.KafkaConfig$");
    Object mod = kc.getField("MODULE$").get(null);
    ConfigDef def = (ConfigDef) kc.getMethod("configDef").invoke(mod);
    TreeMap<String, String> types = new TreeMap<>();
    for (Map.Entry<String, ConfigDef.ConfigKey> e : def.configKeys().entrySet()) {
      types.put(e.getKey(), e.getValue().type.toString());
    }
    Map<String, String> modes = new HashMap<>();
    try {
      Class<?> d = Class.forName("org.apache.kafka.server.config.DynamicBrokerConfig");
      @SuppressWarnings("unchecked")
      Map<String, String> m = (Map<String, String>) d.getMethod("dynamicConfigUpdateModes").invoke(null);
      modes.putAll(m);
      // The replication quotas are dynamic-only: not in KafkaConfig's
      // ConfigDef but in DynamicConfig.Broker's.
      Class<?> b = Class.forName("org.apache.kafka.server.config.DynamicConfig$Broker");
      @SuppressWarnings("unchecked")
      Map<String, ConfigDef.ConfigKey> keys = (Map<String, ConfigDef.ConfigKey>) b.getMethod("configKeys").invoke(null);
      for (Map.Entry<String, ConfigDef.ConfigKey> e : keys.entrySet()) {
        types.putIfAbsent(e.getKey(), e.getValue().type.toString());
      }
    } catch (ClassNotFoundException e) {
      // 3.x: no update modes to print.
    }
    for (Map.Entry<String, String> e : types.entrySet()) {
      System.out.println(e.getKey() + "\t" + e.getValue() + "\t" + modes.getOrDefault(e.getKey(), ""));
    }
  }
}
