// Dump prints every broker config name an Apache Kafka release's jars
// define, one "name<TAB>type<TAB>update mode<TAB>security<TAB>default"
// line each: the mode is empty before 4.x's
// DynamicBrokerConfig.dynamicConfigUpdateModes, security is "security" for
// the configs DynamicBrokerConfig refuses at runtime without a listener
// prefix, and default is "-" for none, else "=" and Kafka's string form.
// Run by gen/main.go with the release's libs/ on the classpath.
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.config.ConfigDef;

public class Dump {
  public static void main(String[] args) throws Exception {
    Class<?> kc = Class.forName("kafka.server.KafkaConfig$");
    Object mod = kc.getField("MODULE$").get(null);
    ConfigDef def = (ConfigDef) kc.getMethod("configDef").invoke(mod);
    TreeMap<String, ConfigDef.ConfigKey> keys = new TreeMap<>(def.configKeys());
    Map<String, String> modes = new HashMap<>();
    java.util.Set<String> security = new java.util.HashSet<>();
    try {
      Class<?> d = Class.forName("org.apache.kafka.server.config.DynamicBrokerConfig");
      @SuppressWarnings("unchecked")
      Map<String, String> m = (Map<String, String>) d.getMethod("dynamicConfigUpdateModes").invoke(null);
      modes.putAll(m);
      // The configs Kafka refuses at runtime without a listener prefix
      // (securityConfigsWithoutListenerPrefix checks this set).
      @SuppressWarnings("unchecked")
      java.util.Set<String> sec = (java.util.Set<String>) d.getField("DYNAMIC_SECURITY_CONFIGS").get(null);
      security.addAll(sec);
      // The replication quotas are dynamic-only: not in KafkaConfig's
      // ConfigDef but in DynamicConfig.Broker's.
      Class<?> b = Class.forName("org.apache.kafka.server.config.DynamicConfig$Broker");
      @SuppressWarnings("unchecked")
      Map<String, ConfigDef.ConfigKey> dyn = (Map<String, ConfigDef.ConfigKey>) b.getMethod("configKeys").invoke(null);
      for (Map.Entry<String, ConfigDef.ConfigKey> e : dyn.entrySet()) {
        keys.putIfAbsent(e.getKey(), e.getValue());
      }
    } catch (ClassNotFoundException e) {
      // 3.x: no update modes to print.
    }
    for (Map.Entry<String, ConfigDef.ConfigKey> e : keys.entrySet()) {
      ConfigDef.ConfigKey k = e.getValue();
      String dflt = "-";
      if (k.hasDefault() && k.defaultValue != null && k.type != ConfigDef.Type.PASSWORD) {
        dflt = "=" + ConfigDef.convertToString(k.defaultValue, k.type);
      }
      System.out.println(e.getKey() + "\t" + k.type + "\t" + modes.getOrDefault(e.getKey(), "") + "\t"
          + (security.contains(e.getKey()) ? "security" : "") + "\t" + dflt);
    }
  }
}
