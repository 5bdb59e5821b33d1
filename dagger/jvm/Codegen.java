package dagger.proto;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.FalseLiteral$;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.types.DataType;

/**
 * Generated code for Dagger's expressions: a call of one of the expression's own methods on its children's
 * values. An expression that only falls back to {@code eval} ({@code CodegenFallback}) keeps its whole operator out
 * of whole-stage code generation, and out of subexpression elimination (the Kafka sink's encoder ran twice a row);
 * one that generates this call does not. The expression object is the generated class's reference, one copy per
 * task, as Spark's own fallback passes it.
 */
final class Codegen {
  private Codegen() {}

  /**
   * {@code ev} as {@code self.method(child0, child1, ...)}, each argument null where its child is; the result is
   * never null.
   */
  static ExprCode call(CodegenContext ctx, ExprCode ev, Object self, String method, DataType type,
      Expression... children) {
    String ref = ctx.addReferenceObj("dagger", self, self.getClass().getName());
    StringBuilder code = new StringBuilder();
    StringBuilder args = new StringBuilder();
    for (Expression child : children) {
      ExprCode value = child.genCode(ctx);
      String javaType = CodeGenerator.boxedType(child.dataType());
      code.append(value.code().toString()).append('\n');
      args.append(args.length() == 0 ? "" : ", ").append("(").append(value.isNull()).append(") ? (").append(javaType)
          .append(") null : (").append(javaType).append(") ").append(value.value());
    }
    code.append(CodeGenerator.javaType(type)).append(' ').append(ev.value()).append(" = ").append(ref).append('.')
        .append(method).append('(').append(args).append(");");
    CodeBlock block = new CodeBlock(
        scala.jdk.javaapi.CollectionConverters.asScala(java.util.List.of(code.toString())).toSeq(),
        scala.jdk.javaapi.CollectionConverters.asScala(java.util.List.<JavaCode>of()).toSeq());
    return new ExprCode(block, FalseLiteral$.MODULE$, ev.value());
  }
}
